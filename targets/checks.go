package targets

import (
	"fmt"
	"strings"
)

// Limits are the cgroup limits of one sandbox (cgroup v1 pids, memory and
// cpu controllers, or their v2 equivalents).
type Limits struct {
	// PidsLimit caps the number of tasks; 0 means no limit.
	PidsLimit int64 `yaml:"pids_limit,omitempty"`
	// Memory caps memory, e.g. 128Mi; empty means no limit.
	Memory string `yaml:"memory,omitempty"`
	// CPUs caps CPU, e.g. 0.5; 0 means no limit.
	CPUs float64 `yaml:"cpus,omitempty"`
	// NoFile caps open files per process (RLIMIT_NOFILE, soft and hard);
	// 0 keeps the host's.
	NoFile int64 `yaml:"nofile,omitempty"`
}

// checkCaps: capability names without the CAP_ prefix (or ALL).
func (v *validator) checkCaps(path string, caps []string) {
	for i, c := range caps {
		if !capPattern.MatchString(c) || strings.HasPrefix(c, "CAP_") {
			v.add(fmt.Sprintf("%s[%d]", path, i), "%q is not a capability name without the CAP_ prefix (or ALL)", c)
		}
	}
}

// checkLimits: cgroup limits a host can enforce.
func (v *validator) checkLimits(path string, l Limits) {
	if l.PidsLimit < 0 {
		v.add(path+".pids_limit", "must not be negative")
	}
	if l.Memory != "" {
		if n, err := ParseSize(l.Memory); err != nil || n < 6<<20 {
			v.add(path+".memory", "must be a size of at least 6Mi such as 128Mi (got %q)", l.Memory)
		}
	}
	if l.CPUs < 0 {
		v.add(path+".cpus", "must not be negative")
	}
	if l.NoFile < 0 || l.NoFile > 1<<20 {
		v.add(path+".nofile", "must be from 0 to 1048576")
	}
}

// checkEnv: the SANDCHECK_ names are the harness's.
func (v *validator) checkEnv(path string, env map[string]string) {
	for k := range env {
		if strings.HasPrefix(k, "SANDCHECK_") {
			v.add(path+"."+k, "the SANDCHECK_ prefix is reserved for the harness")
		}
	}
}
