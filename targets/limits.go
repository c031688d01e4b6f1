package targets

import "time"

// DeclaredLimits are the per-sandbox limits a target declares, which the
// limit probes must run past to show whether each holds. A zero field is a
// limit the target does not declare.
type DeclaredLimits struct {
	// CPUBudget is docker.cpu_time, the CPU time budget of one task.
	CPUBudget time.Duration
	// CPUs is docker.cpus, the share of CPU the sandbox gets (0: no cap).
	CPUs float64
	// Pids is docker.pids_limit.
	Pids int64
	// Nproc is the hard nproc ulimit.
	Nproc int64
	// Nofile is the hard nofile ulimit.
	Nofile int64
	// MemoryBytes is docker.memory.
	MemoryBytes int64
	// ShmBytes is docker.shm_size.
	ShmBytes int64
	// TmpfsBytes is the size of the largest docker.tmpfs mount.
	TmpfsBytes int64
	// TmpfsInodes is the largest nr_inodes of a docker.tmpfs mount.
	TmpfsInodes int64
	// OutputFileBytes is output.max_file_bytes, the release's per-file
	// bound (any runner).
	OutputFileBytes int64
}

// DeclaredLimits returns the limits the target declares for its sandboxes:
// its runner section's (Declared) and the output's per-file bound. Values
// that do not parse count as undeclared: Load refuses them first.
func (t *Target) DeclaredLimits() DeclaredLimits {
	if t == nil {
		return DeclaredLimits{}
	}
	l := t.Declared().Limits
	if t.Output != nil {
		l.OutputFileBytes, _ = t.Output.OutputBounds()
	}
	return l
}

// Declared is what the target's runner section declares in runner-neutral
// terms (the zero value for a target without one).
func (t *Target) Declared() Declared {
	switch {
	case t == nil:
		return Declared{}
	case t.Section != nil:
		return t.Section.Declared()
	case t.Docker != nil:
		return t.Docker.declared()
	case t.Command != nil:
		return Declared{Egress: t.Command.EgressProfile(), Env: t.Command.Env}
	case t.OpenSandbox != nil:
		var d Declared
		if r := t.OpenSandbox.Resources; r != nil {
			d.Limits.MemoryBytes = sizeOrZero(r.Memory)
		}
		return d
	}
	return Declared{}
}

// declared is the docker section in runner-neutral terms.
func (d *Docker) declared() Declared {
	l := DeclaredLimits{CPUBudget: d.CPUBudget(), CPUs: d.CPUs, Pids: d.PidsLimit}
	for _, u := range d.Ulimits {
		switch u.Name {
		case "nproc":
			l.Nproc = u.Hard
		case "nofile":
			l.Nofile = u.Hard
		}
	}
	size := sizeOrZero
	l.MemoryBytes, l.ShmBytes = size(d.Memory), size(d.ShmSize)
	for _, m := range d.Tmpfs {
		l.TmpfsBytes = max(l.TmpfsBytes, size(m.Size))
		l.TmpfsInodes = max(l.TmpfsInodes, m.NrInodes)
	}
	return Declared{
		Limits: l, Egress: d.egressProfile(), Runtime: d.Runtime,
		Tasks:    Tasks{Launch: d.Launch, Agent: d.Agent, CPUTime: d.CPUTime},
		Hostname: d.Hostname, Labels: d.Labels, Env: d.Env,
		Mounts: d.Mounts, Devices: d.Devices,
	}
}

// sizeOrZero is ParseSize with 0 for an empty or malformed size.
func sizeOrZero(s string) int64 {
	if s == "" {
		return 0
	}
	n, err := ParseSize(s)
	if err != nil {
		return 0
	}
	return n
}
