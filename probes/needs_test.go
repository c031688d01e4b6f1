package probes

import (
	"slices"
	"strings"
	"testing"
)

// The catalog is checked against the closed vocabularies at load: a
// misspelled evidence kind or need is a load error, not silence.
func TestCatalogVocabularies(t *testing.T) {
	good := "probes:\n  - id: host.x\n    category: host\n    criterion: no-host-mount\n    severity: high\n    description: d\n    rationale: r\n    remediation: m\n    timeout: 5s\n    sandbox: own\n    host: [canary:metadata, teardown:mounts]\n    needs: [network]\n    expect: {default: blocked}\n"
	cat, err := ParseCatalog([]byte(good))
	if err != nil {
		t.Fatalf("good catalog rejected: %v", err)
	}
	if got := cat[0].Requires(); !slices.Equal(got, []string{"network", "residue"}) {
		t.Errorf("Requires() = %v, want [network residue] (declared, and implied by teardown evidence)", got)
	}
	for name, bad := range map[string]string{
		"misspelled host kind": strings.Replace(good, "canary:metadata", "canary:metdata", 1),
		"unknown host kind":    strings.Replace(good, "teardown:mounts", "vibes", 1),
		"unknown need":         strings.Replace(good, "needs: [network]", "needs: [networking]", 1),
	} {
		_, err := ParseCatalog([]byte(bad))
		if err == nil {
			t.Errorf("%s: accepted", name)
		} else if !strings.Contains(err.Error(), "host") && !strings.Contains(err.Error(), "needs") {
			t.Errorf("%s: error %q does not say which field", name, err)
		}
	}
}
