package targets

import "testing"

func TestReferenceRunnerTargetsLoad(t *testing.T) {
	for _, f := range []string{"bwrap-hardened.yaml", "bwrap-weak.yaml", "process.yaml"} {
		tg, err := Load("../fixtures/targets/" + f)
		if err != nil {
			t.Errorf("%s: %v", f, err)
			continue
		}
		if tg.Section == nil {
			t.Errorf("%s: its runner's section was not decoded", f)
		}
	}
}
