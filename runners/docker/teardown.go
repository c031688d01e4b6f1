package docker

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/client"

	"github.com/sandcheck/sandcheck/internal/bounded"
)

// Bounds of the teardown checks.
const (
	teardownGrace = 10 * time.Second
	teardownPoll  = 200 * time.Millisecond
	maxProcs      = 1 << 16  // /proc entries looked at
	maxProcFile   = 64 << 10 // bytes read of one cgroup or cmdline file
	maxMountinfo  = 8 << 20  // bytes read of mountinfo
)

// VerifyTeardown lists what of the container survived Close: the container
// itself; host processes in its cgroup or naming it on their command line
// (the runtime's shim, runsc's gofer and sandbox); its cgroup folders; mounts
// naming it or its root filesystem. Runtime processes and cgroups go a moment
// after the engine answers, so it checks again until clean or for up to ten
// seconds, then reports the last findings. Calling it before Close is an
// error.
func (s *Sandbox) VerifyTeardown(ctx context.Context) ([]string, error) {
	s.closeMu.Lock()
	ran := s.closeRan
	s.closeMu.Unlock()
	if !ran {
		return nil, fmt.Errorf("verifying teardown of %s: %w", s.id, errNotClosed)
	}
	ctx, cancel := context.WithTimeout(ctx, teardownGrace)
	defer cancel()
	var last []string
	for {
		left, err := s.survivors(ctx)
		switch {
		case err != nil && last != nil && ctx.Err() != nil:
			return last, nil // the grace ran out during a check
		case err != nil:
			return nil, err
		case len(left) == 0:
			return nil, nil
		}
		last = left
		select {
		case <-ctx.Done():
			return last, nil
		case <-time.After(teardownPoll):
		}
	}
}

func (s *Sandbox) survivors(ctx context.Context) ([]string, error) {
	var left []string
	res, err := s.cli.ContainerInspect(ctx, s.id, client.ContainerInspectOptions{})
	switch {
	case err == nil:
		st := "unknown"
		if res.Container.State != nil {
			st = string(res.Container.State.Status)
		}
		left = append(left, fmt.Sprintf("container %s still exists (%s)", s.id, st))
	case !cerrdefs.IsNotFound(err):
		return nil, fmt.Errorf("inspecting container %s: %w", s.id, err)
	}
	procs, err := processesOf(s.id)
	if err != nil {
		return nil, err
	}
	left = append(left, procs...)
	left = append(left, cgroupsOf(s.id)...)
	mnts, err := mountsOf(s.id, s.mergedDir)
	if err != nil {
		return nil, err
	}
	return append(left, mnts...), nil
}

// processesOf lists host processes whose cgroup path or command line contains
// the container ID.
func processesOf(id string) ([]string, error) {
	var out []string
	err := eachProcess(func(pid int, dir string) {
		// A process that exits meanwhile reads as empty: it did not survive.
		inCgroup := bytes.Contains(bounded.ReadFile(filepath.Join(dir, "cgroup"), maxProcFile), []byte(id))
		cmd := bounded.ReadFile(filepath.Join(dir, "cmdline"), maxProcFile)
		if !inCgroup && !bytes.Contains(cmd, []byte(id)) {
			return
		}
		what := printable(cmd, 160)
		if what == "" {
			what = printable(bounded.ReadFile(filepath.Join(dir, "comm"), 64), 64)
		}
		if inCgroup {
			out = append(out, fmt.Sprintf("process %d (%s) is in the container's cgroup", pid, what))
		} else {
			out = append(out, fmt.Sprintf("process %d (%s) names the container on its command line", pid, what))
		}
	})
	return out, err
}

// eachProcess calls fn with the pid and /proc folder of every host process
// but this one, up to maxProcs of them.
func eachProcess(fn func(pid int, dir string)) error {
	d, err := os.Open("/proc")
	if err != nil {
		return fmt.Errorf("listing processes: %w", err)
	}
	defer d.Close()
	names, err := d.Readdirnames(maxProcs)
	if err != nil && err != io.EOF {
		return fmt.Errorf("listing processes: %w", err)
	}
	self := os.Getpid()
	for _, n := range names {
		if pid, err := strconv.Atoi(n); err == nil && pid != self {
			fn(pid, filepath.Join("/proc", n))
		}
	}
	return nil
}

// reapRuntime kills what the container runtime left of a removed container
// that never started: runsc 2022's containerd shim (and its gofer and
// sandbox, if any) outlives a failed start, with nothing left to serve. Only
// processes whose command line is a shim's or runsc's and names the
// container's full ID are touched. It waits a moment for them to go on
// their own first, and returns what it killed and what survived.
func reapRuntime(ctx context.Context, id string) (reaped, left []string) {
	deadline := time.Now().Add(2 * time.Second)
	for {
		pids := runtimeProcesses(id)
		if len(pids) == 0 {
			return reaped, nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			for pid, what := range pids {
				if err := syscall.Kill(pid, syscall.SIGKILL); err == nil {
					reaped = append(reaped, fmt.Sprintf("%d (%s)", pid, what))
				}
			}
			break
		}
		time.Sleep(teardownPoll)
	}
	// The engine runs a short-lived shim of its own to clean up after a
	// dead one: done once none has been seen for three polls in a row.
	quiet := 0
	for range 25 { // up to 5 s
		if len(runtimeProcesses(id)) == 0 {
			if quiet++; quiet == 3 {
				return reaped, nil
			}
		} else {
			quiet = 0
		}
		time.Sleep(teardownPoll)
	}
	for pid, what := range runtimeProcesses(id) {
		left = append(left, fmt.Sprintf("process %d (%s)", pid, what))
	}
	return reaped, left
}

// runtimeProcesses finds the shim and runsc processes whose command line
// names the container ID.
func runtimeProcesses(id string) map[int]string {
	out := map[int]string{}
	eachProcess(func(pid int, dir string) {
		cmd := bounded.ReadFile(filepath.Join(dir, "cmdline"), maxProcFile)
		if !bytes.Contains(cmd, []byte(id)) {
			return
		}
		argv0 := filepath.Base(string(bytes.SplitN(cmd, []byte{0}, 2)[0]))
		if strings.HasPrefix(argv0, "containerd-shim") || strings.HasPrefix(argv0, "runsc") {
			out[pid] = printable(cmd, 160)
		}
	})
	return out
}

// cgroupsOf lists cgroup folders of the container under the usual layouts of
// the cgroupfs and systemd drivers, v1 and v2.
func cgroupsOf(id string) []string {
	patterns := []string{
		"/sys/fs/cgroup/docker/" + id,
		"/sys/fs/cgroup/*/docker/" + id,
		"/sys/fs/cgroup/system.slice/docker-" + id + ".scope",
		"/sys/fs/cgroup/*/system.slice/docker-" + id + ".scope",
	}
	var out []string
	for _, p := range patterns {
		found, _ := filepath.Glob(p)
		for _, f := range found {
			out = append(out, "cgroup "+f+" still exists")
		}
	}
	return out
}

// mountsOf lists mounts in this process's mount namespace that name the
// container ID or its root filesystem.
func mountsOf(id, mergedDir string) ([]string, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil, fmt.Errorf("reading mountinfo: %w", err)
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(io.LimitReader(f, maxMountinfo))
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if strings.Contains(line, id) || (mergedDir != "" && strings.Contains(line, mergedDir)) {
			fields := strings.Fields(line)
			mp := line
			if len(fields) > 4 {
				mp = fields[4]
			}
			out = append(out, "mount "+mp+" still exists")
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("reading mountinfo: %w", err)
	}
	return out, nil
}

// printable renders a NUL-separated command line or a name in one bounded
// line.
func printable(b []byte, n int) string {
	b = bytes.TrimRight(b, "\x00\n")
	s := strings.Map(func(r rune) rune {
		if r == 0 {
			return ' '
		}
		if r < 0x20 || r == 0x7f {
			return -1
		}
		return r
	}, strings.ToValidUTF8(string(b), ""))
	if len(s) > n {
		s = strings.ToValidUTF8(s[:n], "") + "..."
	}
	return s
}
