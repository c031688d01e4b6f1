package engine

import (
	"reflect"
	"testing"
	"time"

	"github.com/sandcheck/sandcheck/probes"
	"github.com/sandcheck/sandcheck/targets"
)

// TestPlanLimitsRunPastTheDeclared: each limit probe's bound is past the
// limit the target declares (never below its default); a limit above the
// profile's maximum is named, not pushed. Before, every bound was fixed
// (4 s of CPU against a 6 s budget).
func TestPlanLimitsRunPastTheDeclared(t *testing.T) {
	d := targets.DeclaredLimits{CPUBudget: 6 * time.Second, Pids: 1000, Nproc: 2000, Nofile: 3000,
		MemoryBytes: 1 << 30, ShmBytes: 256 << 20, TmpfsBytes: 512 << 20, TmpfsInodes: 50000, OutputFileBytes: 16 << 20}
	p := planLimits(d, defaultLimitMax)
	want := probes.Bounds{CPUMsec: 7500, Processes: 1064, Threads: 2064, MemoryMiB: 1280, Files: 4096,
		DiskMiB: 528, ShmMiB: 272, Inodes: 50256, OutputFileBytes: 16<<20 + 64<<10}
	if !reflect.DeepEqual(p.bounds, want) {
		t.Errorf("bounds\n got %+v\nwant %+v", p.bounds, want)
	}
	if len(p.over) != 0 {
		t.Errorf("over the maximum: %v", p.over)
	}
	if f := p.scale["resources.cpu-deadline"]; f < 1.87 || f > 1.88 {
		t.Errorf("cpu-deadline timeout scale %v, want 7500/4000", f)
	}

	// Small limits keep the defaults (which already run past them).
	small := planLimits(targets.DeclaredLimits{CPUBudget: 3 * time.Second, Pids: 64, Nofile: 1024, MemoryBytes: 128 << 20}, defaultLimitMax)
	if !reflect.DeepEqual(small.bounds, probes.Bounds{CPUMsec: 4000, Processes: 512, Threads: 512, MemoryMiB: 640, Files: 4096}) || len(small.scale) != 0 {
		t.Errorf("small limits: %+v, scale %v", small.bounds, small.scale)
	}

	// Above the maximum: named for the probe, with no bound set.
	big := planLimits(targets.DeclaredLimits{CPUBudget: 2 * time.Minute, Pids: 100000}, defaultLimitMax)
	if o, ok := big.over["resources.cpu-deadline"]; !ok || o.declared != "2m0s" || o.maximum != "1m0s" {
		t.Errorf("cpu over the maximum: %+v", big.over)
	}
	if _, ok := big.over["resources.fork-bomb"]; !ok {
		t.Errorf("pids over the maximum not named: %+v", big.over)
	}
	if big.bounds.CPUMsec != 0 || big.bounds.Processes != 0 {
		t.Errorf("bounds set past a limit above the maximum: %+v", big.bounds)
	}
}

// TestLimitBoundsCarryTimeouts: a probe whose bound grew gets its grown
// timeout in the parameters, so the probe binary's own deadline (80% of
// the catalog's timeout before) does not cut a longer burn short.
func TestLimitBoundsCarryTimeouts(t *testing.T) {
	e := &Engine{target: &targets.Target{Profile: "no-network-transform", Docker: &targets.Docker{CPUTime: "40s"}}}
	b := e.limitBounds()
	if b == nil || b.CPUMsec != 50000 {
		t.Fatalf("bounds %+v", b)
	}
	// As the probe binary reads them.
	doc, err := probes.Params{Schema: probes.ParamsSchema, Bounds: b}.Encode()
	if err != nil {
		t.Fatal(err)
	}
	p, err := probes.ParseParams([]byte(doc))
	if err != nil {
		t.Fatalf("the probe binary refuses the bounds: %v", err)
	}
	b = p.Bounds
	spec, _ := probes.Lookup("resources.cpu-deadline")
	got := b.Timeout("resources.cpu-deadline", spec.Timeout.D())
	if want := time.Duration(float64(spec.Timeout) * 50000 / 4000); got != want {
		t.Errorf("timeout %s, want %s", got, want)
	}
	if got := b.Timeout("resources.memory", time.Minute); got != time.Minute {
		t.Errorf("an unchanged probe's timeout %s", got)
	}
	if (&Engine{target: &targets.Target{}}).limitBounds() != nil {
		t.Error("a target without limits has bounds")
	}
}
