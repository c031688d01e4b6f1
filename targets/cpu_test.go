package targets

import (
	"strings"
	"testing"
	"time"
)

func TestCPUTime(t *testing.T) {
	tg, err := Parse("t.yaml", []byte(inputsHead+"docker:\n  runtime: runc\n  network: none\n  cpu_time: 2s\n"))
	if err != nil || tg.Docker.CPUBudget() != 2*time.Second {
		t.Fatalf("cpu_time 2s: %v %v", tg, err)
	}
	for _, bad := range []string{"lots", "0s", "-1s", "2h"} {
		_, err := Parse("t.yaml", []byte(inputsHead+"docker:\n  runtime: runc\n  network: none\n  cpu_time: "+bad+"\n"))
		if err == nil || !strings.Contains(err.Error(), "$.docker.cpu_time") {
			t.Errorf("cpu_time %q: %v, want an error naming the field", bad, err)
		}
	}
}
