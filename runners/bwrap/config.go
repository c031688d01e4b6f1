package bwrap

import (
	_ "embed"
	"fmt"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"github.com/sandcheck/sandcheck/targets"
)

// schema is the section's JSON Schema fragment, part of
// policies/schema/target.schema.json (its test checks the two agree).
//
//go:embed schema.json
var schema []byte

// Config is how the bwrap runner (Debian's /usr/bin/bwrap) configures each
// sandbox. The root file system is built from read-only binds of the host's
// /usr (with /bin, /lib, /lib64 and /sbin as symbolic links into it, as on
// Debian 12), a fresh /proc, a minimal /dev and the declared tmpfs scratch;
// Binds add more.
//
//sandcheck:section bwrap Bwrap
type Config struct {
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
	// net (Namespaces). A namespace not listed is the host's.
	Unshare []string `yaml:"unshare,omitempty"`
	// Binds are extra bind mounts of host paths (relative to the target
	// file).
	Binds []targets.Mount `yaml:"binds,omitempty"`
	// Tmpfs are size-limited tmpfs mounts (bwrap --size --tmpfs; one with
	// nr_inodes is mounted by the runner on the host and bound in, as bwrap
	// cannot cap inodes); /tmp is required: bwrap needs it to enter the
	// sandbox for an exec.
	Tmpfs []targets.Tmpfs `yaml:"tmpfs,omitempty"`
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
	// ReadOnlyRoot makes the sandbox's root (bwrap's own tmpfs holding the
	// mount points) read-only once it is built (bwrap --remount-ro /), so
	// only the tmpfs mounts and writable binds take writes.
	ReadOnlyRoot bool `yaml:"read_only_root"`
	// SystemPaths is "masked" (the /proc paths Docker masks are hidden and
	// the ones it makes read-only are, as runc does) or "unconfined" (the
	// default: bwrap's own /proc).
	SystemPaths string `yaml:"system_paths,omitempty"`
	// Limits are enforced through a cgroup the runner makes per sandbox.
	Limits targets.Limits `yaml:"limits,omitempty"`
	// Network is "none" (an empty network namespace; needs net in Unshare)
	// or "harness" (a network namespace the runner makes on the harness
	// bridge).
	Network string `yaml:"network"`
	// Env is added to the sandbox's environment (which starts empty).
	Env map[string]string `yaml:"env,omitempty"`
	// Hostname is the sandbox's host name (needs uts in Unshare), with
	// ${SANDCHECK_RUN_ID}, ${SANDCHECK_TARGET} and ${SANDCHECK_TASK} filled
	// per sandbox from the harness's labels (see Docker.Hostname).
	Hostname string `yaml:"hostname,omitempty"`
}

var _ targets.Section = (*Config)(nil)

// Namespaces are the namespaces bwrap can unshare.
var Namespaces = []string{"user", "pid", "ipc", "uts", "cgroup", "net"}

var userPattern = regexp.MustCompile(`^[0-9]+(:[0-9]+)?$`)

// Decode is the bwrap runner's targets.SectionDecoder: the one place its
// section is checked.
func Decode(src *targets.SectionSource) (targets.Section, error) {
	var b Config
	if err := src.Decode(&b); err != nil {
		return nil, err
	}
	if !userPattern.MatchString(b.HostUser) {
		src.Add("host_user", "must be uid[:gid] in numbers (got %q)", b.HostUser)
	}
	if b.User != "" && !userPattern.MatchString(b.User) {
		src.Add("user", "must be uid[:gid] in numbers (got %q)", b.User)
	}
	if b.Launch != "" && b.Launch != "exec" && b.Launch != "task" {
		src.Add("launch", "%q is not one of [exec task]", b.Launch)
	}
	for i, ns := range b.Unshare {
		if !slices.Contains(Namespaces, ns) {
			src.Add(fmt.Sprintf("unshare[%d]", i), "%q is not one of %v", ns, Namespaces)
		}
	}
	if !b.Root() && !b.Unshares("user") {
		src.Add("unshare", "an unprivileged host_user needs the user namespace (add user)")
	}
	checkBinds(src, b.Binds)
	checkTmpfs(src, b.Tmpfs)
	if !slices.ContainsFunc(b.Tmpfs, func(t targets.Tmpfs) bool { return filepath.Clean(t.Path) == "/tmp" }) {
		src.Add("tmpfs", "must include /tmp (bwrap needs it to run a command in a running sandbox)")
	}
	if b.Seccomp != "" && b.Seccomp != "unconfined" && !strings.HasSuffix(b.Seccomp, ".json") {
		src.Add("seccomp", "must be unconfined or a path to a .json profile (got %q)", b.Seccomp)
	}
	if b.SystemPaths != "" && b.SystemPaths != "masked" && b.SystemPaths != "unconfined" {
		src.Add("system_paths", "%q is not one of [masked unconfined]", b.SystemPaths)
	}
	src.CheckCaps("cap_drop", b.CapDrop)
	src.CheckCaps("cap_add", b.CapAdd)
	src.CheckLimits("limits", b.Limits)
	switch b.Network {
	case "none":
		if !b.Unshares("net") {
			src.Add("network", "none needs net in unshare (otherwise the sandbox has the host's network)")
		}
	case "harness":
	case "":
		src.Add("network", "is required: none or harness")
	default:
		src.Add("network", "%q is not one of [none harness]", b.Network)
	}
	src.CheckEnv("env", b.Env)
	if b.Hostname != "" {
		if !b.Unshares("uts") {
			src.Add("hostname", "needs uts in unshare (otherwise it would be the host's)")
		}
		src.CheckIdentityVars("hostname", b.Hostname)
	}
	return &b, nil
}

func checkBinds(src *targets.SectionSource, ms []targets.Mount) {
	for i, m := range ms {
		p := fmt.Sprintf("binds[%d]", i)
		if m.Source == "" {
			src.Add(p+".source", "is required")
		}
		if !filepath.IsAbs(m.Target) || filepath.Clean(m.Target) == "/" {
			src.Add(p+".target", "must be an absolute path other than / (got %q)", m.Target)
		}
		if strings.HasPrefix(filepath.Clean(m.Target), "/.sandcheck") {
			src.Add(p+".target", "%s is reserved for the probe binary", m.Target)
		}
	}
}

func checkTmpfs(src *targets.SectionSource, ts []targets.Tmpfs) {
	for i, tm := range ts {
		p := fmt.Sprintf("tmpfs[%d]", i)
		if !filepath.IsAbs(tm.Path) {
			src.Add(p+".path", "must be an absolute path (got %q)", tm.Path)
		}
		if n, err := targets.ParseSize(tm.Size); err != nil || n <= 0 {
			src.Add(p+".size", "must be a size such as 16Mi (got %q)", tm.Size)
		}
		if tm.NrInodes < 0 {
			src.Add(p+".nr_inodes", "must not be negative")
		}
	}
}

// Declared: bwrap's cgroup limits, its launch key and its binds (host
// folders in the sandbox as docker's mounts are: the harness plants its
// honeyfiles in them too). Its hostname is the runner's own business (it
// needs uts) and its environment is handed over as written.
func (b *Config) Declared() targets.Declared {
	l := b.Limits
	memory, _ := targets.ParseSize(l.Memory) // 0 when empty; Decode refused a bad one
	return targets.Declared{
		Limits: targets.DeclaredLimits{Pids: l.PidsLimit, CPUs: l.CPUs, Nofile: l.NoFile, MemoryBytes: memory},
		Tasks:  targets.Tasks{Launch: b.Launch},
		Mounts: b.Binds,
	}
}

// IdentityHostname is the bwrap hostname for one identity, made a valid
// host name as Identity.Hostname does ("" when none is declared).
func (b *Config) IdentityHostname(id targets.Identity) string {
	if b == nil {
		return ""
	}
	return id.Hostname(b.Hostname)
}

// Root reports whether bwrap runs as the host's root.
func (b *Config) Root() bool { return b.HostUser == "0" || strings.HasPrefix(b.HostUser, "0:") }

// Unshares reports whether the namespace is in Unshare.
func (b *Config) Unshares(ns string) bool { return slices.Contains(b.Unshare, ns) }
