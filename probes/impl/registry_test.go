package impl

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/sandcheck/sandcheck/probes"
)

// TestRegistryCoversCatalog: every catalog ID has an implementation and
// there is no implementation without a catalog entry.
func TestRegistryCoversCatalog(t *testing.T) {
	var catalog []string
	for _, s := range probes.Catalog() {
		catalog = append(catalog, s.ID)
		if !Known(s.ID) {
			t.Errorf("catalog probe %s has no implementation", s.ID)
		}
	}
	for id := range registry {
		if _, ok := probes.Lookup(id); !ok {
			t.Errorf("implemented probe %s is not in the catalog", id)
		}
	}
	if got := IDs(); !slices.Equal(got, catalog) {
		t.Errorf("IDs() = %v, want the catalog order %v", got, catalog)
	}
}

func TestRunUnknownProbe(t *testing.T) {
	_, err := Run(context.Background(), "host.nope", probes.Params{})
	if !errors.Is(err, ErrUnknownProbe) {
		t.Fatalf("Run(unknown) error = %v, want ErrUnknownProbe", err)
	}
}

func TestRunFillsProbeAndValidates(t *testing.T) {
	r, err := Run(context.Background(), "privilege.seccomp", probes.Params{})
	if err != nil {
		t.Fatal(err)
	}
	if r.Probe != "privilege.seccomp" {
		t.Errorf("probe = %q", r.Probe)
	}
	if err := r.Validate(); err != nil {
		t.Error(err)
	}
}
