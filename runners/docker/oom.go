package docker

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/sandcheck/sandcheck/internal/bounded"
	"github.com/sandcheck/sandcheck/runners"
)

var _ runners.OOMCounter = (*Sandbox)(nil)

// errNoMemoryCgroup says no memory cgroup of the container was found under
// the usual layouts.
var errNoMemoryCgroup = errors.New("no memory cgroup found for the container")

// OOMKills reads the container's memory cgroup's count of OOM kills:
// cgroup v1 (memory.oom_control) and v2 (memory.events), under the
// cgroupfs and systemd drivers' layouts, as CPUUsed finds its cgroup.
func (s *Sandbox) OOMKills() (uint64, error) {
	id := s.id
	paths := append(containerCgroupFiles(id, []string{"memory"}, "memory.oom_control"), containerCgroupFiles(id, nil, "memory.events")...)
	for _, p := range paths {
		b := bounded.ReadFile(p, 4096)
		if len(b) == 0 {
			continue
		}
		n, ok, err := oomKillLine(b)
		if err != nil {
			return 0, fmt.Errorf("reading %s: %w", p, err)
		}
		if ok {
			return n, nil
		}
	}
	return 0, fmt.Errorf("container %s: %w", shortID(id), errNoMemoryCgroup)
}

// oomKillLine finds the "oom_kill N" line of a cgroup memory file.
func oomKillLine(b []byte) (uint64, bool, error) {
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "oom_kill "); ok {
			n, err := strconv.ParseUint(strings.TrimSpace(v), 10, 64)
			return n, true, err
		}
	}
	return 0, false, nil
}
