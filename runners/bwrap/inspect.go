package bwrap

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/sandcheck/sandcheck/runners"
)

// Inspect is the host's view of the sandbox, read from the host's /proc and
// the sandbox's cgroup (what the kernel says, not what the target asked):
// the workload's capabilities, seccomp mode and no_new_privs from
// /proc/PID/status, its mounts from /proc/PID/mountinfo, its limits from
// the cgroup. The workload is the sandbox's first command (bwrap's own
// init's child when the PID namespace is unshared). bwrap keeps no image
// and no labels: those are listed in Unknown.
func (sb *Sandbox) Inspect(ctx context.Context) (runners.RuntimeView, error) {
	cfg := sb.r.cfg
	v := runners.RuntimeView{
		Runtime:     "bwrap",
		User:        fmt.Sprintf("%d:%d", sb.r.uid, sb.r.gid),
		CapAdd:      cfg.CapAdd,
		CapDrop:     cfg.CapDrop,
		NetworkMode: cfg.Network,
		Hostname:    sb.spec.Hostname,
		Unknown:     []string{"image", "image_digest", "labels", "security_opt"},
	}
	if cfg.Network == "harness" {
		v.NetworkMode = sb.spec.Network
	}
	for _, kv := range sb.env {
		k, _, _ := strings.Cut(kv, "=")
		v.Env = append(v.Env, k)
	}
	sort.Strings(v.Env)
	v.State = "running"
	if sb.First.Exited() {
		// Nothing of the sandbox is left to read: what the kernel said
		// while it lived (a task's view, read as it waited for its
		// go-ahead), else only what the target asked.
		if sb.taskView != nil {
			v = *sb.taskView
		}
		v.State = "exited"
		res, _ := sb.First.Wait(ctx)
		v.ExitCode = res.ExitCode
		return v, nil
	}
	pid := workload(sb.childPID)
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return v, fmt.Errorf("inspecting %s: %w", sb.SandboxID, err)
	}
	st := statusFields(string(status))
	v.NoNewPrivileges = st["NoNewPrivs"] == "1"
	switch st["Seccomp"] {
	case "0":
		v.Seccomp = "unconfined"
	case "2":
		v.Seccomp = "custom"
	default:
		v.Seccomp = "strict"
	}
	if eff, err := strconv.ParseUint(st["CapEff"], 16, 64); err == nil {
		v.Privileged = eff == fullCaps() && !cfg.Unshares("user")
	}
	if v.Mounts, v.ReadOnlyRootfs, err = mounts(pid); err != nil {
		return v, fmt.Errorf("inspecting %s: %w", sb.SandboxID, err)
	}
	// A masked path is one of Docker's that something is mounted over, or
	// that this kernel's /proc lacks (nothing there to read).
	for _, p := range maskedPaths {
		over := slices.ContainsFunc(v.Mounts, func(m runners.Mount) bool { return m.Destination == p })
		_, err := os.Lstat(fmt.Sprintf("/proc/%d/root%s", pid, p))
		if over || errors.Is(err, os.ErrNotExist) {
			v.MaskedPaths = append(v.MaskedPaths, p)
		}
	}
	v.PidsLimit = readLimit(sb.Cgroup.Paths(), "pids.max")
	v.MemoryBytes = readLimit(sb.Cgroup.Paths(), "memory.limit_in_bytes")
	quota, period := readLimit(sb.Cgroup.Paths(), "cpu.cfs_quota_us"), readLimit(sb.Cgroup.Paths(), "cpu.cfs_period_us")
	if quota > 0 && period > 0 {
		v.NanoCPUs = quota * 1e9 / period
	}
	return v, nil
}

// taskExecWait bounds how long start waits for a task's command to be
// exec'd before it reads the kernel's view of it.
const taskExecWait = 5 * time.Second

// waitTaskExec waits until the sandbox's workload is argv0, the task's
// command (held at its go-ahead), so the view start reads is the task's
// (its seccomp filter, capabilities, no_new_privs), not bwrap's still
// setting it up.
func (sb *Sandbox) waitTaskExec(ctx context.Context, argv0 string) error {
	deadline := time.Now().Add(taskExecWait)
	for {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", workload(sb.childPID)))
		if err == nil {
			if first, _, _ := strings.Cut(string(b), "\x00"); first == argv0 {
				return nil
			}
		}
		if sb.First.Exited() {
			return errors.New("the task ended before it could be inspected")
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("the workload is not %s after %s", argv0, taskExecWait)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// workload is the sandbox's command: the first child of bwrap's init when
// there is one, else pid itself.
func workload(pid int) int {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/children", pid, pid))
	if err != nil {
		return pid
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return pid
	}
	if c, err := strconv.Atoi(f[0]); err == nil {
		return c
	}
	return pid
}

func statusFields(s string) map[string]string {
	out := map[string]string{}
	for _, line := range strings.Split(s, "\n") {
		k, v, ok := strings.Cut(line, ":")
		if ok {
			out[k] = strings.TrimSpace(v)
		}
	}
	return out
}

// fullCaps is the host root's own effective capability mask (this
// process's): a workload holding all of it has every capability the host
// grants.
func fullCaps() uint64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	n, err := strconv.ParseUint(statusFields(string(b))["CapEff"], 16, 64)
	if err != nil {
		return 0
	}
	return n
}

// mounts reads the workload's mount table: each mount's type (tmpfs, proc,
// devpts, mqueue, device for a device node, bind for the rest), source (the host path a bind shows), destination
// and read-only flag, and whether / is read-only.
func mounts(pid int) ([]runners.Mount, bool, error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/mountinfo", pid))
	if err != nil {
		return nil, false, err
	}
	defer f.Close()
	var out []runners.Mount
	rootRO := false
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for n := 0; sc.Scan() && n < 4096; n++ {
		fields := strings.Fields(sc.Text())
		sep := -1
		for i, x := range fields {
			if x == "-" {
				sep = i
				break
			}
		}
		if sep < 0 || len(fields) < sep+3 || len(fields) < 6 {
			continue
		}
		ro := false
		for _, o := range strings.Split(fields[5], ",") {
			ro = ro || o == "ro"
		}
		m := runners.Mount{Source: fields[3], Destination: fields[4], ReadOnly: ro}
		switch fs := fields[sep+1]; fs {
		case "tmpfs", "proc", "devpts", "mqueue":
			m.Type = fs
		case "devtmpfs":
			// A device node bwrap --dev binds in (null, zero, ...): not a
			// host folder.
			m.Type = "device"
		default:
			m.Type = "bind"
		}
		if m.Destination == "/" {
			rootRO = ro
		}
		out = append(out, m)
	}
	return out, rootRO, sc.Err()
}

// readLimit reads a cgroup limit file from whichever folder has it; 0 when
// absent or unlimited.
func readLimit(dirs []string, file string) int64 {
	for _, d := range dirs {
		b, err := os.ReadFile(filepath.Join(d, file))
		if err != nil {
			continue
		}
		n, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
		if err != nil || n >= 1<<62 {
			return 0
		}
		return n
	}
	return 0
}
