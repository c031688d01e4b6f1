package engine

import (
	"strings"
	"testing"

	"github.com/sandcheck/sandcheck/runners"
)

// A probe that exits with no report gives its cause: the signal behind a
// code past 128, and that it printed nothing on stderr.
func TestProbeExitGivesItsCause(t *testing.T) {
	for _, c := range []struct {
		out  runners.ExitResult
		want string
	}{
		{runners.ExitResult{ExitCode: 137}, "probe exited with code 137 (killed by SIGKILL): no error output"},
		{runners.ExitResult{ExitCode: 143, Stderr: []byte("bye")}, "probe exited with code 143 (killed by SIGTERM): bye"},
		{runners.ExitResult{ExitCode: 2, Stderr: []byte("sandcheck-probe: bad")}, "probe exited with code 2: sandcheck-probe: bad"},
	} {
		got := interpretAll([]string{"p"}, c.out)["p"].Detail
		if !strings.HasPrefix(got, c.want) {
			t.Errorf("exit %d: %q, want %q", c.out.ExitCode, got, c.want)
		}
	}
}
