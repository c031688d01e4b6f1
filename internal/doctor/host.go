package doctor

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/coreos/go-iptables/iptables"
)

func checkBubblewrap(s system) Check {
	c := Check{Name: "bubblewrap"}
	path, err := s.lookPath("bwrap")
	if err != nil {
		c.Status, c.Detail, c.Fix = Missing, "bwrap is not on PATH", "install bubblewrap (make setup)"
		return c
	}
	c.Status, c.Detail = OK, path
	return c
}

func checkRoot(s system) Check {
	c := Check{Name: "root"}
	if s.euid == 0 {
		c.Status, c.Detail = OK, "running as root"
		return c
	}
	c.Status = Missing
	c.Detail = "running as uid " + strconv.Itoa(s.euid) + ": the harness network, the eBPF tracer and host-side checks need root"
	c.Fix = "run sandcheck as root (sudo)"
	return c
}

// tracingDirs are where tracefs is mounted, in the order libraries look.
var tracingDirs = []string{"sys/kernel/tracing", "sys/kernel/debug/tracing"}

// checkTracepoints looks for the raw_syscalls tracepoints the eBPF tracer
// attaches to. tracefs is root-only, so without root the answer may be
// "could not tell".
func checkTracepoints(s system) Check {
	c := Check{Name: "bpf-tracepoints"}
	var denied error
	for _, dir := range tracingDirs {
		id := filepath.Join(s.root, dir, "events/raw_syscalls/sys_enter/id")
		_, err := os.Stat(id)
		if err == nil {
			c.Status, c.Detail = OK, "raw_syscalls tracepoints in /"+dir
			if _, err := os.Stat(filepath.Join(s.root, "sys/kernel/btf/vmlinux")); err != nil {
				c.Detail += " (no kernel BTF at /sys/kernel/btf/vmlinux)"
			}
			return c
		}
		if errors.Is(err, fs.ErrPermission) {
			denied = err
		}
	}
	if denied != nil && s.euid != 0 {
		c.Status, c.Detail, c.Fix = Warn, "could not tell: tracefs is readable by root only", "run sandcheck doctor as root"
		return c
	}
	c.Status = Missing
	if mountPointExists(filepath.Join(s.root, tracingDirs[0])) {
		c.Detail = "tracefs is not mounted"
		c.Fix = "mount -t tracefs tracefs /sys/kernel/tracing (make setup does this)"
	} else {
		c.Detail = "the kernel exposes no tracefs"
		c.Fix = "use a kernel with CONFIG_FTRACE_SYSCALLS and CONFIG_BPF_EVENTS"
	}
	return c
}

func mountPointExists(dir string) bool {
	fi, err := os.Stat(dir)
	return err == nil && fi.IsDir()
}

// maxMountsSize bounds the read of the mount table.
const maxMountsSize = 4 << 20

// checkCgroup tells cgroup v1, v2 and hybrid apart from the mount table, and
// warns when the controllers that bound a sandbox (memory, pids) are absent.
func checkCgroup(s system) Check {
	c := Check{Name: "cgroup"}
	mounts, err := readMounts(filepath.Join(s.root, "proc/self/mounts"))
	if err != nil {
		c.Status, c.Detail, c.Fix = Warn, "could not tell: "+oneLine(err.Error()), "check that /proc is mounted"
		return c
	}
	var (
		v2Root, v2Unified bool
		v1Controllers     []string
	)
	for _, m := range mounts {
		switch {
		case m.fstype == "cgroup2" && m.dir == "/sys/fs/cgroup":
			v2Root = true
		case m.fstype == "cgroup2" && m.dir == "/sys/fs/cgroup/unified":
			v2Unified = true
		case m.fstype == "cgroup" && strings.HasPrefix(m.dir, "/sys/fs/cgroup/"):
			for _, o := range strings.Split(m.opts, ",") {
				if slices.Contains(cgroupV1Controllers, o) {
					v1Controllers = append(v1Controllers, o)
				}
			}
		}
	}
	var have []string
	switch {
	case v2Root:
		data, err := readBounded(filepath.Join(s.root, "sys/fs/cgroup/cgroup.controllers"), 4096)
		if err != nil {
			c.Status, c.Detail, c.Fix = Warn, "v2, but its controllers could not be read: "+oneLine(err.Error()), "check the cgroup2 mount on /sys/fs/cgroup"
			return c
		}
		have = strings.Fields(string(data))
		c.Detail = "v2"
	case len(v1Controllers) > 0:
		have = v1Controllers
		c.Detail = "v1"
		if v2Unified {
			c.Detail = "v1 (hybrid: cgroup2 at /sys/fs/cgroup/unified)"
		}
	default:
		c.Status, c.Detail = Missing, "no cgroup filesystem is mounted on /sys/fs/cgroup"
		c.Fix = "mount -t cgroup2 none /sys/fs/cgroup (or run cgroupfs-mount; make setup does this)"
		return c
	}
	var lacking []string
	for _, want := range []string{"memory", "pids"} {
		if !slices.Contains(have, want) {
			lacking = append(lacking, want)
		}
	}
	if len(lacking) > 0 {
		c.Status = Warn
		c.Detail += "; no " + strings.Join(lacking, ", ") + " controller: memory and process limits cannot be enforced"
		c.Fix = "enable the " + strings.Join(lacking, " and ") + " cgroup controller(s) (kernel command line or cgroup mounts)"
		return c
	}
	c.Status = OK
	return c
}

// cgroupV1Controllers are the v1 controller names that can appear in mount
// options (other options, like rw or relatime, are not controllers).
var cgroupV1Controllers = []string{
	"blkio", "cpu", "cpuacct", "cpuset", "devices", "freezer", "hugetlb",
	"memory", "net_cls", "net_prio", "perf_event", "pids", "rdma", "misc",
}

type mount struct {
	dir, fstype, opts string
}

// readMounts parses a /proc/mounts-format table.
func readMounts(path string) ([]mount, error) {
	data, err := readBounded(path, maxMountsSize)
	if err != nil {
		return nil, err
	}
	var out []mount
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 4 {
			continue
		}
		out = append(out, mount{dir: f[1], fstype: f[2], opts: f[3]})
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("reading %s: %w", path, err)
	}
	return out, nil
}

// readBounded reads at most limit bytes of a file.
func readBounded(path string, limit int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, limit))
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", path, err)
	}
	return data, nil
}

// checkDockerUserChain looks for DOCKER-USER, where the harness network puts
// its drop rules; dockerd creates it when it manages iptables.
func checkDockerUserChain(s system) Check {
	c := Check{Name: "docker-user-chain"}
	if s.euid != 0 {
		c.Status, c.Detail, c.Fix = Warn, "could not tell: listing iptables chains needs root", "run sandcheck doctor as root"
		return c
	}
	ok, err := s.chainExists("filter", "DOCKER-USER")
	switch {
	case err != nil:
		c.Status, c.Detail, c.Fix = Missing, "iptables is not usable: "+oneLine(err.Error()), "install iptables (make setup)"
	case !ok:
		c.Status, c.Detail = Missing, "the filter table has no DOCKER-USER chain"
		c.Fix = "start dockerd with iptables enabled (the default), or run make setup, which creates the chain"
	default:
		c.Status, c.Detail = OK, "filter/DOCKER-USER exists"
	}
	return c
}

func iptablesChainExists(table, chain string) (bool, error) {
	ipt, err := iptables.New()
	if err != nil {
		return false, fmt.Errorf("running iptables: %w", err)
	}
	ok, err := ipt.ChainExists(table, chain)
	if err != nil {
		return false, fmt.Errorf("listing %s chains: %w", table, err)
	}
	return ok, nil
}
