package engine

import (
	"os/exec"
	"strings"
	"testing"
)

// The engine names no runner backend: runners come from the factory, and
// what only some can do is found by type assertion.
func TestEngineNamesNoRunner(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	deps := strings.Fields(string(out))
	if len(deps) < 10 {
		t.Fatalf("go list -deps gave %d packages, too few to be the real list", len(deps))
	}
	for _, d := range deps {
		if strings.HasPrefix(d, "github.com/sandcheck/sandcheck/runners/") {
			t.Errorf("the engine depends on %s", d)
		}
	}
}
