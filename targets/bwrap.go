package targets

import (
	"fmt"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
)

// Bwrap is how the bwrap runner (Debian's /usr/bin/bwrap) configures each
// sandbox. The root file system is built from read-only binds of the host's
// /usr (with /bin, /lib, /lib64 and /sbin as symbolic links into it, as on
// Debian 12), a fresh /proc, a minimal /dev and the declared tmpfs scratch;
// Binds add more.
type Bwrap struct {
	// HostUser is "uid[:gid]" of the host account bwrap runs as: an
	// unprivileged account (the way bwrap is meant to be used, the sandbox's
	// user namespace then maps to that account) or "0" (root: no user
	// namespace needed, the sandbox's root is the host's root).
	HostUser string `yaml:"host_user"`
	// User is "uid[:gid]" inside the sandbox; needs the user namespace
	// unless HostUser is root. Empty keeps the host user's own IDs.
	User string `yaml:"user,omitempty"`
	// Launch is "exec" (one long-lived sandbox, each task run in it; the
	// default) or "task" (each task is the first process of a fresh
	// sandbox).
	Launch string `yaml:"launch,omitempty"`
	// Unshare lists the namespaces to unshare: user, pid, ipc, uts, cgroup,
	// net (BwrapNamespaces). A namespace not listed is the host's.
	Unshare []string `yaml:"unshare,omitempty"`
	// Binds are extra bind mounts of host paths (relative to the target
	// file).
	Binds []Mount `yaml:"binds,omitempty"`
	// Tmpfs are size-limited tmpfs mounts (bwrap --size --tmpfs); /tmp is
	// required: bwrap needs it to enter the sandbox for an exec.
	Tmpfs []Tmpfs `yaml:"tmpfs,omitempty"`
	// Seccomp is "unconfined" (or empty) or a path to a Docker-format JSON
	// profile (relative to the target file), compiled to BPF by the runner.
	Seccomp string `yaml:"seccomp,omitempty"`
	// CapDrop and CapAdd are capability names without CAP_ (ALL allowed in
	// both), applied in that order (bwrap --cap-drop, --cap-add).
	CapDrop []string `yaml:"cap_drop,omitempty"`
	CapAdd  []string `yaml:"cap_add,omitempty"`
	// DieWithParent kills the sandbox when the runner dies.
	DieWithParent bool `yaml:"die_with_parent"`
	// NewSession starts the sandbox in a new terminal session (no TIOCSTI
	// into the caller's terminal).
	NewSession bool `yaml:"new_session"`
	// Limits are enforced through a cgroup the runner makes per sandbox.
	Limits Limits `yaml:"limits,omitempty"`
	// Network is "none" (an empty network namespace; needs net in Unshare)
	// or "harness" (a network namespace the runner makes on the harness
	// bridge).
	Network string `yaml:"network"`
	// Env is added to the sandbox's environment (which starts empty).
	Env map[string]string `yaml:"env,omitempty"`
}

// Limits are the cgroup limits of one sandbox (cgroup v1 pids, memory and
// cpu controllers, or their v2 equivalents).
type Limits struct {
	// PidsLimit caps the number of tasks; 0 means no limit.
	PidsLimit int64 `yaml:"pids_limit,omitempty"`
	// Memory caps memory, e.g. 128Mi; empty means no limit.
	Memory string `yaml:"memory,omitempty"`
	// CPUs caps CPU, e.g. 0.5; 0 means no limit.
	CPUs float64 `yaml:"cpus,omitempty"`
}

// BwrapNamespaces are the namespaces bwrap can unshare.
var BwrapNamespaces = []string{"user", "pid", "ipc", "uts", "cgroup", "net"}

var userPattern = regexp.MustCompile(`^[0-9]+(:[0-9]+)?$`)

func (v *validator) checkBwrap(b *Bwrap) {
	if !userPattern.MatchString(b.HostUser) {
		v.add("$.bwrap.host_user", "must be uid[:gid] in numbers (got %q)", b.HostUser)
	}
	if b.User != "" && !userPattern.MatchString(b.User) {
		v.add("$.bwrap.user", "must be uid[:gid] in numbers (got %q)", b.User)
	}
	if b.Launch != "" && b.Launch != "exec" && b.Launch != "task" {
		v.add("$.bwrap.launch", "%q is not one of [exec task]", b.Launch)
	}
	for i, ns := range b.Unshare {
		if !slices.Contains(BwrapNamespaces, ns) {
			v.add(fmt.Sprintf("$.bwrap.unshare[%d]", i), "%q is not one of %v", ns, BwrapNamespaces)
		}
	}
	root := strings.HasPrefix(b.HostUser, "0:") || b.HostUser == "0"
	if !root && !slices.Contains(b.Unshare, "user") {
		v.add("$.bwrap.unshare", "an unprivileged host_user needs the user namespace (add user)")
	}
	v.checkBinds("$.bwrap.binds", b.Binds)
	v.checkTmpfs("$.bwrap.tmpfs", b.Tmpfs)
	if !slices.ContainsFunc(b.Tmpfs, func(t Tmpfs) bool { return filepath.Clean(t.Path) == "/tmp" }) {
		v.add("$.bwrap.tmpfs", "must include /tmp (bwrap needs it to run a command in a running sandbox)")
	}
	if b.Seccomp != "" && b.Seccomp != "unconfined" && !strings.HasSuffix(b.Seccomp, ".json") {
		v.add("$.bwrap.seccomp", "must be unconfined or a path to a .json profile (got %q)", b.Seccomp)
	}
	v.checkCaps("$.bwrap.cap_drop", b.CapDrop)
	v.checkCaps("$.bwrap.cap_add", b.CapAdd)
	v.checkLimits("$.bwrap.limits", b.Limits)
	switch b.Network {
	case "none":
		if !slices.Contains(b.Unshare, "net") {
			v.add("$.bwrap.network", "none needs net in unshare (otherwise the sandbox has the host's network)")
		}
	case "harness":
	case "":
		v.add("$.bwrap.network", "is required: none or harness")
	default:
		v.add("$.bwrap.network", "%q is not one of [none harness]", b.Network)
	}
	v.checkEnv("$.bwrap.env", b.Env)
}

// Root reports whether bwrap runs as the host's root.
func (b *Bwrap) Root() bool { return b.HostUser == "0" || strings.HasPrefix(b.HostUser, "0:") }

// Unshares reports whether the namespace is in Unshare.
func (b *Bwrap) Unshares(ns string) bool { return slices.Contains(b.Unshare, ns) }

func (v *validator) checkBinds(path string, ms []Mount) {
	for i, m := range ms {
		p := fmt.Sprintf("%s[%d]", path, i)
		if m.Source == "" {
			v.add(p+".source", "is required")
		}
		if !filepath.IsAbs(m.Target) || filepath.Clean(m.Target) == "/" {
			v.add(p+".target", "must be an absolute path other than / (got %q)", m.Target)
		}
		if strings.HasPrefix(filepath.Clean(m.Target), "/.sandcheck") {
			v.add(p+".target", "%s is reserved for the probe binary", m.Target)
		}
	}
}

func (v *validator) checkTmpfs(path string, ts []Tmpfs) {
	for i, tm := range ts {
		p := fmt.Sprintf("%s[%d]", path, i)
		if !filepath.IsAbs(tm.Path) {
			v.add(p+".path", "must be an absolute path (got %q)", tm.Path)
		}
		if n, err := ParseSize(tm.Size); err != nil || n <= 0 {
			v.add(p+".size", "must be a size such as 16Mi (got %q)", tm.Size)
		}
		if tm.NrInodes != 0 {
			v.add(p+".nr_inodes", "bwrap cannot cap a tmpfs's inodes; leave it out")
		}
	}
}

func (v *validator) checkCaps(path string, caps []string) {
	for i, c := range caps {
		if !capPattern.MatchString(c) || strings.HasPrefix(c, "CAP_") {
			v.add(fmt.Sprintf("%s[%d]", path, i), "%q is not a capability name without the CAP_ prefix (or ALL)", c)
		}
	}
}

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
}

func (v *validator) checkEnv(path string, env map[string]string) {
	for k := range env {
		if strings.HasPrefix(k, "SANDCHECK_") {
			v.add(path+"."+k, "the SANDCHECK_ prefix is reserved for the harness")
		}
	}
}
