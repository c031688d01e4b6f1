package engine

import (
	"fmt"
	"reflect"
	"time"

	"github.com/sandcheck/sandcheck/evidence"
	"github.com/sandcheck/sandcheck/probes"
	"github.com/sandcheck/sandcheck/targets"
)

// The limit probes push a sandbox to a limit and see whether it holds. A
// fixed bound below the limit the target declares proves nothing (a 4 s
// burn never meets a 6 s CPU budget, and was graded as no budget at all),
// so each probe runs past the declared limit: its bound is the larger of
// its catalog default and the declared limit plus a margin. How far the
// harness will push is bounded by the maximum the profile allows; a limit
// declared above it is a limit that does not bound the task as the profile
// requires, graded as such with the reason, and the probe is not run.

// limitMax is the largest value of each limit a profile allows.
type limitMax struct {
	cpu                      time.Duration
	pids, nofile, inodes     int64
	memory, shm, tmpfs, file int64 // bytes
}

// defaultLimitMax is what every profile of the design guide allows today:
// a minute of CPU per task, 2048 tasks, 4096 descriptors, 4 GiB of memory,
// 512 MiB of /dev/shm, 2 GiB of each scratch tmpfs, 262144 inodes per
// tmpfs, 64 MiB per released file. A declared limit above one of these does
// not bound an agent's task as the profile requires (the weak references'
// 4096 tasks, 8192 descriptors and 1 GiB /dev/shm are above them).
var defaultLimitMax = limitMax{cpu: time.Minute, pids: 2048, nofile: 4096, inodes: 262144,
	memory: 4 << 30, shm: 512 << 20, tmpfs: 2 << 30, file: 64 << 20}

// limitMaxFor is the maximum the profile allows.
func limitMaxFor(profile string) limitMax {
	_ = profile // the same for every profile today
	return defaultLimitMax
}

// The limit probes' default bounds (the catalog's "bound").
const (
	defCPUMsec   = 4000
	defProcesses = 512
	defThreads   = 512
	defMemoryMiB = 640
	defFiles     = 4096
	defDiskMiB   = 256
	defShmMiB    = 96
	defInodes    = 16384
	defFileBytes = 4 << 20
)

// limitPlan is, for one run, how far each limit probe pushes, how much
// longer than its catalog timeout it may take, and the probes not run
// because the limit they test is declared above the profile's maximum.
type limitPlan struct {
	bounds probes.Bounds
	// scale is each probe's bound over its default (above 1 only).
	scale map[string]float64
	// over is the reason per probe whose limit is above the maximum.
	over map[string]overLimit
}

// overLimit is one limit declared above the maximum.
type overLimit struct {
	key               string
	declared, maximum string
}

// planLimits sets each limit probe's bound past the declared limits.
func planLimits(d targets.DeclaredLimits, m limitMax) limitPlan {
	p := limitPlan{scale: map[string]float64{}, over: map[string]overLimit{}}
	const mib = 1 << 20
	// one sets a bound: past the declared value (in the probe's unit) by the
	// margin, never below the default, unless the declared value is above
	// the maximum.
	one := func(ids []string, key string, declared, maximum int64, unit string, def, margin int64, set func(int64)) {
		if declared <= 0 {
			return
		}
		if declared > maximum {
			for _, id := range ids {
				p.over[id] = overLimit{key: key, declared: render(declared, unit), maximum: render(maximum, unit)}
			}
			return
		}
		b := max(def, declared+margin)
		set(b)
		for _, id := range ids {
			if b > def {
				p.scale[id] = float64(b) / float64(def)
			}
		}
	}
	b := &p.bounds
	if d.CPUBudget > 0 {
		ms := d.CPUBudget.Milliseconds()
		one([]string{"resources.cpu-deadline"}, "docker.cpu_time", ms, m.cpu.Milliseconds(), "ms", defCPUMsec, max(1000, ms/4), func(v int64) { b.CPUMsec = v })
	}
	one([]string{"resources.fork-bomb"}, "pids_limit", d.Pids, m.pids, "", defProcesses, 64, func(v int64) { b.Processes = v })
	one([]string{"resources.thread-bomb"}, "pids_limit or the nproc ulimit", max(d.Pids, d.Nproc), m.pids, "", defThreads, 64, func(v int64) { b.Threads = v })
	memMiB := d.MemoryBytes / mib
	one([]string{"resources.memory"}, "memory", memMiB, m.memory/mib, " MiB", defMemoryMiB, max(64, memMiB/4), func(v int64) { b.MemoryMiB = v })
	one([]string{"resources.fd-exhaustion"}, "the nofile ulimit", d.Nofile, m.nofile, "", defFiles, 64, func(v int64) { b.Files = v })
	one([]string{"resources.shm-fill"}, "docker.shm_size", d.ShmBytes/mib, m.shm/mib, " MiB", defShmMiB, 16, func(v int64) { b.ShmMiB = v })
	one([]string{"resources.disk-fill", "resources.rootfs-fill", "resources.decompression-bomb"}, "docker.tmpfs size", d.TmpfsBytes/mib, m.tmpfs/mib, " MiB", defDiskMiB, 16, func(v int64) { b.DiskMiB = v })
	one([]string{"resources.inode-exhaustion"}, "docker.tmpfs nr_inodes", d.TmpfsInodes, m.inodes, "", defInodes, 256, func(v int64) { b.Inodes = v })
	one([]string{"output.oversize"}, "output.max_file_bytes", d.OutputFileBytes, m.file, " bytes", defFileBytes, 64<<10, func(v int64) { b.OutputFileBytes = v })
	return p
}

// limits is the run's limit plan, made once from the target.
func (e *Engine) limits() *limitPlan {
	e.limitOnce.Do(func() {
		p := planLimits(e.target.DeclaredLimits(), limitMaxFor(e.target.Profile))
		e.limitPlan = &p
	})
	return e.limitPlan
}

// limitBounds are the bounds the probe binary gets (nil: all defaults).
func (e *Engine) limitBounds() *probes.Bounds {
	b := e.limits().bounds
	for id, f := range e.limits().scale {
		if s, ok := probes.Lookup(id); ok {
			if b.TimeoutsMsec == nil {
				b.TimeoutsMsec = map[string]int64{}
			}
			b.TimeoutsMsec[id] = time.Duration(float64(s.Timeout) * f).Milliseconds()
		}
	}
	if reflect.ValueOf(b).IsZero() {
		return nil
	}
	return &b
}

// fitLimits gives each limit probe whose bound grew a timeout grown in
// proportion, so that pushing past a larger limit keeps the catalog's
// slack.
func (e *Engine) fitLimits(sel []probes.Spec) []probes.Spec {
	out := make([]probes.Spec, len(sel))
	for i, s := range sel {
		if f, ok := e.limits().scale[s.ID]; ok {
			s.Timeout = probes.Duration(float64(s.Timeout) * f)
		}
		out[i] = s
	}
	return out
}

// limitAboveMax is the host's finding for a probe whose limit the target
// declares above the profile's maximum: the probe is not run, and the
// finding, an escape, says why.
func (e *Engine) limitAboveMax(spec probes.Spec) (evidence.Item, bool) {
	o, ok := e.limits().over[spec.ID]
	if !ok {
		return evidence.Item{}, false
	}
	return evidence.Item{Source: evidence.SourceRuntime, Kind: "limit-above-maximum", Indicates: probes.Escaped,
		Summary: fmt.Sprintf("the target declares %s %s, above the %s profile's maximum of %s: a limit that large does not bound the task as the profile requires, so the probe was not run past it",
			o.key, o.declared, e.target.Profile, o.maximum),
		Data: map[string]string{"key": o.key, "declared": o.declared, "maximum": o.maximum, "profile": e.target.Profile}}, true
}

// render writes a limit for a reader: milliseconds as a duration.
func render(v int64, unit string) string {
	if unit == "ms" {
		return (time.Duration(v) * time.Millisecond).String()
	}
	return fmt.Sprintf("%d%s", v, unit)
}
