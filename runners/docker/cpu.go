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
	for _, p := range containerCgroupFiles(id, []string{"cpuacct", "cpu,cpuacct"}, "cpuacct.usage") {
		if b := bounded.ReadFile(p, 64); len(b) > 0 {
			ns, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
			if err != nil {
				return 0, fmt.Errorf("reading %s: %w", p, err)
			}
			return time.Duration(ns), nil
		}
	}
	for _, p := range containerCgroupFiles(id, nil, "cpu.stat") {
		b := bounded.ReadFile(p, 4096)
		for _, l := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(l, "usage_usec "); ok {
				us, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
				if err != nil {
					return 0, fmt.Errorf("reading %s: %w", p, err)
				}
				return time.Duration(us) * time.Microsecond, nil
			}
		}
	}
	return 0, fmt.Errorf("container %s: %w", id, errNoCPUAccounting)
}

// containerCgroupFiles are the paths of a container's cgroup file under
// the cgroupfs and systemd drivers' layouts: under each cgroup v1
// controller's hierarchy named (controllers), or, with none, cgroup v2's
// unified one.
func containerCgroupFiles(id string, controllers []string, file string) []string {
	roots := []string{"/sys/fs/cgroup"}
	if len(controllers) > 0 {
		roots = roots[:0]
		for _, c := range controllers {
			roots = append(roots, "/sys/fs/cgroup/"+c)
		}
	}
	var out []string
	for _, r := range roots {
		out = append(out, filepath.Join(r, "docker", id, file), filepath.Join(r, "system.slice", "docker-"+id+".scope", file))
	}
	return out
}

// Kill sends SIGKILL to the container's processes (the platform's watchdog
// stopping it); Close still removes it.
func (s *Sandbox) Kill(ctx context.Context) error {
	if _, err := s.cli.ContainerKill(ctx, s.id, client.ContainerKillOptions{Signal: "KILL"}); err != nil {
		return fmt.Errorf("killing container %s: %w", s.id, err)
	}
	return nil
}
