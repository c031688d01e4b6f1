package probes

import "time"

// Bounds are how far each limit probe pushes, as the harness sets them: past
// the limit the target declares, so a platform whose limit is larger than a
// probe's default bound is not reported as having none. A zero field keeps
// the probe's default bound (the catalog's "bound").
type Bounds struct {
	// CPUMsec is the CPU time resources.cpu-deadline burns, in ms.
	CPUMsec int64 `json:"cpu_ms,omitempty"`
	// Processes is how many processes resources.fork-bomb starts.
	Processes int64 `json:"processes,omitempty"`
	// Threads is how many threads resources.thread-bomb starts.
	Threads int64 `json:"threads,omitempty"`
	// MemoryMiB is how much memory resources.memory touches.
	MemoryMiB int64 `json:"memory_mib,omitempty"`
	// Files is how many descriptors resources.fd-exhaustion opens.
	Files int64 `json:"files,omitempty"`
	// DiskMiB is how much resources.disk-fill, resources.rootfs-fill and
	// resources.decompression-bomb write in each place.
	DiskMiB int64 `json:"disk_mib,omitempty"`
	// ShmMiB is how much resources.shm-fill writes to /dev/shm.
	ShmMiB int64 `json:"shm_mib,omitempty"`
	// Inodes is how many files resources.inode-exhaustion creates per place.
	Inodes int64 `json:"inodes,omitempty"`
	// OutputFileBytes is the size of the file output.oversize writes.
	OutputFileBytes int64 `json:"output_file_bytes,omitempty"`
	// TimeoutsMsec are the harness's timeouts of the probes whose bound grew
	// past the default (the catalog's timeout for the rest), so that the
	// probe binary's own deadline grows with the bound too.
	// In milliseconds.
	TimeoutsMsec map[string]int64 `json:"timeouts_ms,omitempty"`
}

// Timeout is the harness's timeout of probe id, or def.
func (b *Bounds) Timeout(id string, def time.Duration) time.Duration {
	if b != nil {
		if ms, ok := b.TimeoutsMsec[id]; ok && ms > 0 {
			return time.Duration(ms) * time.Millisecond
		}
	}
	return def
}

// Bound returns v when the harness set it (above zero), else def.
func Bound(v, def int64) int64 {
	if v > 0 {
		return v
	}
	return def
}
