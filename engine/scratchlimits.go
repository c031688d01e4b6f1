package engine

import (
	"fmt"
	"strings"

	"github.com/sandcheck/sandcheck/evidence"
	"github.com/sandcheck/sandcheck/probes"
	"github.com/sandcheck/sandcheck/runners"
	"github.com/sandcheck/sandcheck/targets"
)

// Limits above which scratch counts as unlimited, the same the probe reads
// (probes/impl persistence_state.go): more room or more files than any
// task's scratch needs.
const (
	scratchLimitBytes  = 1 << 30
	scratchLimitInodes = 1 << 20
)

// scratchLimitsObserver gives the host's own word on scratch limits: the
// tmpfs mounts the harness started the sandbox with (the target's docker
// section) and the runtime's view of its root filesystem and writable
// mounts. Only where every writable place is one of those tmpfs mounts, each
// within the limits, does it read blocked; otherwise it informs without
// indicating, so a "blocked" from the probe stays unconfirmed.
func scratchLimitsObserver(e *Engine, _ string, o observation) []evidence.Item {
	var tmpfs []targets.Tmpfs
	declared := e.target.Docker != nil
	if declared {
		tmpfs = e.target.Docker.Tmpfs
	}
	var v *runners.RuntimeView
	if o.s != nil {
		v = o.s.view
	}
	return []evidence.Item{scratchLimitsFact(v, declared, tmpfs)}
}

// scratchLimitsFact: v is the runtime's view, declared says the harness
// started the sandbox from a configuration of its own (tmpfs lists its
// tmpfs mounts).
func scratchLimitsFact(v *runners.RuntimeView, declared bool, tmpfs []targets.Tmpfs) evidence.Item {
	it := evidence.Item{Source: evidence.SourceRuntime, Kind: "scratch-limits"}
	switch {
	case v == nil:
		it.Summary = "the host has no runtime view of the sandbox: its scratch limits are the probe's word only"
		return it
	case !declared:
		it.Summary = "the harness did not start this sandbox from a configuration of its own: the host has no view of its scratch limits"
		return it
	case !v.ReadOnlyRootfs || containsUnknown(v, "read_only_rootfs"):
		it.Summary = "the root filesystem is writable (or the runtime could not tell): /var/tmp and home are on the node's storage, whose limits the host does not read"
		return it
	case containsUnknown(v, "mounts"):
		it.Summary = "the runtime could not tell its mounts"
		return it
	}
	var open []string
	for _, m := range v.Mounts {
		if m.Destination == runners.ProbeMount || m.ReadOnly || (m.Type != "bind" && m.Type != "volume") {
			continue
		}
		open = append(open, fmt.Sprintf("writable %s %s at %s (the host's storage)", m.Type, m.Source, m.Destination))
	}
	var limits []string
	for _, t := range tmpfs {
		size, err := targets.ParseSize(t.Size)
		switch {
		case err != nil || size <= 0:
			open = append(open, fmt.Sprintf("tmpfs %s has no size the host can read (%q)", t.Path, t.Size))
		case size > scratchLimitBytes:
			open = append(open, fmt.Sprintf("tmpfs %s is %d MiB", t.Path, size>>20))
		case t.NrInodes <= 0:
			open = append(open, fmt.Sprintf("tmpfs %s has the kernel's default inode count (half the machine's RAM pages)", t.Path))
		case t.NrInodes > scratchLimitInodes:
			open = append(open, fmt.Sprintf("tmpfs %s has %d inodes", t.Path, t.NrInodes))
		default:
			limits = append(limits, fmt.Sprintf("%s %s/%d inodes", t.Path, t.Size, t.NrInodes))
		}
	}
	if len(open) > 0 {
		it.Summary = "not every writable place has a limit the host declared: " + truncate(strings.Join(open, "; "), 400)
		return it
	}
	it.Indicates = probes.Blocked
	it.Summary = fmt.Sprintf("read-only root filesystem, no writable host folder or volume; every tmpfs the harness mounted is within %d MiB and %d inodes: %s",
		scratchLimitBytes>>20, scratchLimitInodes, strings.Join(orNone(limits), ", "))
	return it
}

func containsUnknown(v *runners.RuntimeView, field string) bool {
	for _, u := range v.Unknown {
		if u == field {
			return true
		}
	}
	return false
}

func orNone(s []string) []string {
	if len(s) == 0 {
		return []string{"none"}
	}
	return s
}
