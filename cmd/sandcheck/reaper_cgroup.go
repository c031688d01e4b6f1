package main

// The reaper leaves the run's cgroups. systemd stopping a unit, a CI
// runner cancelling a job and the OOM killer's group kill end every
// process of a cgroup, whatever its session or process group: a reaper
// still in its run's cgroup died with the run, and the run's sandboxes,
// network and folders stayed. So the run moves its reaper, just started,
// to the top cgroup of every hierarchy it can see (cgroup v1's each, v2's
// one), above any cgroup that can be killed as the run's.

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/sandcheck/sandcheck/internal/bounded"
)

// cgroupMove is one hierarchy a process is to leave: its top folder (the
// hierarchy's mount point) and the cgroup it is in.
type cgroupMove struct {
	top, from string
}

// cgroupMoves reads a process's /proc/PID/cgroup and this process's
// /proc/self/mountinfo and lists the hierarchies in which the process is
// below the top one visible here.
func cgroupMoves(cgroups, mountinfo string) []cgroupMove {
	v1 := map[string]string{} // sorted controllers (with name=) → mount point
	v2, v2root := "", ""
	for _, line := range strings.Split(mountinfo, "\n") {
		pre, post, ok := strings.Cut(line, " - ")
		f, g := strings.Fields(pre), strings.Fields(post)
		if !ok || len(f) < 5 || len(g) < 3 {
			continue
		}
		switch g[0] {
		case "cgroup2":
			if v2 == "" {
				v2, v2root = unescapeMount(f[4]), f[3]
			}
		case "cgroup":
			var ctrls []string
			for _, o := range strings.Split(g[2], ",") {
				if !slices.Contains([]string{"rw", "ro", "relatime", "noatime", "nosuid", "nodev", "noexec", "clone_children", "xattr", "noprefix"}, o) &&
					!strings.HasPrefix(o, "release_agent=") {
					ctrls = append(ctrls, o)
				}
			}
			slices.Sort(ctrls)
			key := strings.Join(ctrls, ",")
			if _, seen := v1[key]; !seen && key != "" {
				v1[key] = unescapeMount(f[4]) + "\x00" + f[3]
			}
		}
	}
	var out []cgroupMove
	for _, line := range strings.Split(strings.TrimSpace(cgroups), "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 {
			continue
		}
		top, root := "", ""
		if parts[0] == "0" && parts[1] == "" {
			top, root = v2, v2root
		} else {
			ctrls := strings.Split(parts[1], ",")
			slices.Sort(ctrls)
			top, root, _ = strings.Cut(v1[strings.Join(ctrls, ",")], "\x00")
		}
		// The top visible is the mount's root: "/" in the host's (or the
		// process's own cgroup namespace), a subtree in a container that
		// was given only its own.
		if top == "" || parts[2] == "/" || parts[2] == root {
			continue
		}
		out = append(out, cgroupMove{top: top, from: parts[2]})
	}
	return out
}

// unescapeMount undoes mountinfo's octal escapes (\040 for a space).
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// leaveCgroups moves process pid to the top cgroup of every hierarchy in
// which it is below it, and returns what it moved it out of; the error
// names the hierarchies it could not leave (no permission: not root; a v2
// top with controllers enabled below it refuses processes).
func leaveCgroups(pid int) (left []string, err error) {
	cg := bounded.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pid), 64<<10)
	mi := bounded.ReadFile("/proc/self/mountinfo", 4<<20)
	if len(cg) == 0 || len(mi) == 0 {
		return nil, fmt.Errorf("leaving the run's cgroups: cannot read /proc/%d/cgroup or /proc/self/mountinfo", pid)
	}
	var errs []error
	for _, m := range cgroupMoves(string(cg), string(mi)) {
		p := filepath.Join(m.top, "cgroup.procs")
		if werr := os.WriteFile(p, []byte(strconv.Itoa(pid)), 0o644); werr != nil {
			errs = append(errs, fmt.Errorf("leaving cgroup %s of %s: %w", m.from, m.top, werr))
			continue
		}
		left = append(left, m.top+m.from)
	}
	return left, errors.Join(errs...)
}
