package docker

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/moby/moby/client"

	"github.com/sandcheck/sandcheck/internal/bounded"
	"github.com/sandcheck/sandcheck/runners"
)

var _ runners.CPUMeter = (*Sandbox)(nil)

// errNoCPUAccounting says no cgroup of the container with CPU accounting
// was found under the usual layouts.
var errNoCPUAccounting = errors.New("no CPU accounting cgroup found for the container")

// CPUUsed reads the CPU time the container's cgroup has accounted: every
// host task in it, so under runsc the sentry and gofer that run the
// workload. cgroup v1 (cpuacct.usage, nanoseconds) and v2 (cpu.stat
// usage_usec), under the cgroupfs and systemd drivers' layouts.
func (s *Sandbox) CPUUsed() (time.Duration, error) {
	id := s.id
	for _, p := range []string{
		"/sys/fs/cgroup/cpuacct/docker/" + id + "/cpuacct.usage",
		"/sys/fs/cgroup/cpu,cpuacct/docker/" + id + "/cpuacct.usage",
		"/sys/fs/cgroup/cpuacct/system.slice/docker-" + id + ".scope/cpuacct.usage",
		"/sys/fs/cgroup/cpu,cpuacct/system.slice/docker-" + id + ".scope/cpuacct.usage",
	} {
		if b := bounded.ReadFile(p, 64); len(b) > 0 {
			ns, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
			if err != nil {
				return 0, fmt.Errorf("reading %s: %w", p, err)
			}
			return time.Duration(ns), nil
		}
	}
	for _, dir := range []string{"/sys/fs/cgroup/docker/" + id, "/sys/fs/cgroup/system.slice/docker-" + id + ".scope"} {
		b := bounded.ReadFile(filepath.Join(dir, "cpu.stat"), 4096)
		for _, l := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(l, "usage_usec "); ok {
				us, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
				if err != nil {
					return 0, fmt.Errorf("reading %s/cpu.stat: %w", dir, err)
				}
				return time.Duration(us) * time.Microsecond, nil
			}
		}
	}
	return 0, fmt.Errorf("container %s: %w", id, errNoCPUAccounting)
}

// Kill sends SIGKILL to the container's processes (the platform's watchdog
// stopping it); Close still removes it.
func (s *Sandbox) Kill(ctx context.Context) error {
	if _, err := s.cli.ContainerKill(ctx, s.id, client.ContainerKillOptions{Signal: "KILL"}); err != nil {
		return fmt.Errorf("killing container %s: %w", s.id, err)
	}
	return nil
}
