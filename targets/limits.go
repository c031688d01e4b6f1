package targets

import "time"

// Declared are the per-sandbox limits a target declares, which the limit
// probes must run past to show whether each holds. A zero field is a limit
// the target does not declare.
type Declared struct {
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

// DeclaredLimits returns the limits the target declares for its sandboxes
// (the docker runner's keys, bwrap's cgroup limits and OpenSandbox's
// memory limit; other runners declare none here). Values that do not parse count as undeclared: Load
// refuses them first.
func (t *Target) DeclaredLimits() Declared {
	var l Declared
	if t == nil {
		return l
	}
	if t.Output != nil {
		l.OutputFileBytes, _ = t.Output.OutputBounds()
	}
	if t.OpenSandbox != nil {
		if r := t.OpenSandbox.Resources; r != nil {
			l.MemoryBytes = sizeOrZero(r.Memory)
		}
		return l
	}
	if t.Bwrap != nil {
		b := t.Bwrap.Limits
		l.Pids, l.CPUs, l.Nofile, l.MemoryBytes = b.PidsLimit, b.CPUs, b.NoFile, sizeOrZero(b.Memory)
		return l
	}
	if t.Docker == nil {
		return l
	}
	d := t.Docker
	l.CPUBudget, l.CPUs, l.Pids = d.CPUBudget(), d.CPUs, d.PidsLimit
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
	return l
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
