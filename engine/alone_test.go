package engine

import (
	"testing"

	"github.com/sandcheck/sandcheck/probes"
	"github.com/sandcheck/sandcheck/targets"
)

// The probes that push a limit run alone only where the target declares
// that limit: with none there is nothing for the host to see reached, and
// running them alone at the end only lengthens the run.
func TestLimitProbesRunAloneOnlyUnderADeclaredLimit(t *testing.T) {
	spec := func(id string) probes.Spec {
		for _, s := range probes.Catalog() {
			if s.ID == id {
				return s
			}
		}
		t.Fatalf("no probe %s in the catalog", id)
		return probes.Spec{}
	}
	memory, fork, threads := spec("resources.memory"), spec("resources.fork-bomb"), spec("resources.thread-bomb")
	cases := []struct {
		name   string
		docker targets.Docker
		want   map[string]bool
	}{
		{"no limits", targets.Docker{}, map[string]bool{memory.ID: false, fork.ID: false, threads.ID: false}},
		{"memory", targets.Docker{Memory: "256m"}, map[string]bool{memory.ID: true, fork.ID: false, threads.ID: false}},
		{"pids", targets.Docker{PidsLimit: 128}, map[string]bool{memory.ID: false, fork.ID: true, threads.ID: true}},
		{"nproc", targets.Docker{Ulimits: []targets.Ulimit{{Name: "nproc", Soft: 64, Hard: 64}}}, map[string]bool{memory.ID: false, fork.ID: true, threads.ID: true}},
	}
	for _, c := range cases {
		e := &Engine{target: &targets.Target{Name: "t", Runner: "docker", Docker: &c.docker}}
		for _, s := range []probes.Spec{memory, fork, threads} {
			if got := e.runsAlone(s); got != c.want[s.ID] {
				t.Errorf("%s: %s runs alone %v, want %v", c.name, s.ID, got, c.want[s.ID])
			}
		}
	}
}
