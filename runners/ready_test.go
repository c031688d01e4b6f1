package runners

import "testing"

func TestLastLines(t *testing.T) {
	got := LastLines([]byte("one\ntwo\x1b[31m\n\nthree\tfour\xff\n"), 2)
	if got != "two[31m | three four" {
		t.Errorf("LastLines = %q", got)
	}
}
