package wrapper

import (
	_ "embed"
	"fmt"
	"os"
	"os/user"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"

	"github.com/sandcheck/sandcheck/probes"
	"github.com/sandcheck/sandcheck/targets"
)

// schema is the section's JSON Schema fragment, part of
// policies/schema/target.schema.json (its test checks the two agree).
//
//go:embed schema.json
var schema []byte

// Config is how the wrapper runner runs a sandbox that is a command prefix
// (srt, firejail, bwrap invoked by hand): every command is one invocation
// of Argv, with the placeholders filled, started as User in a cgroup and a
// network namespace the runner makes.
//
//sandcheck:section wrapper Wrapper
type Config struct {
	// Argv runs one command inside the sandbox. ${ARGV} (a word of its
	// own) is replaced by the command's words, ${ARGV_SHELL} (anywhere in
	// a word) by the command as one shell-quoted string, ${WORKDIR} by the
	// sandbox's fresh folder, ${PROBE_DIR} by the host folder holding
	// the probe binary (read-only) and ${DNS} by the address of the
	// harness's resolver (network harness or proxy: for a wrapper that
	// takes the box's resolver on its command line, as firejail's --dns,
	// the way a runtime is given it). Argv[0] is looked up on Env's PATH.
	Argv []string `yaml:"argv"`
	// User starts the wrapper: "root", or an existing account's name or
	// uid[:gid]. The sandbox's folder is owned by it.
	User string `yaml:"user"`
	// Env is the environment the agent's process would have; PATH and
	// HOME (${WORKDIR}) are set when it leaves them out. ${WORKDIR} is
	// filled in values.
	Env map[string]string `yaml:"env,omitempty"`
	// Files are settings the wrapper reads, copied (relative to the target
	// file) into the sandbox's folder at Path (relative to ${WORKDIR}).
	Files []File `yaml:"files,omitempty"`
	// Network is where the runner puts the wrapper's host side: "none" (a
	// network namespace with only loopback: the wrapper, and any proxy of
	// its own, reach nothing else), "harness" (a namespace on the harness
	// bridge) or "proxy" (the same namespace, for a wrapper that filters the
	// box's egress through a proxy of its own, such as srt's: the proxy
	// reaches the harness's canaries and nothing else, the probes try the
	// proxy path beside the direct one, and the wrapper is not handed the
	// harness's own proxy to chain through).
	Network string `yaml:"network"`
	// Proxies are the proxies the wrapper announces to the box (network
	// proxy only), as URLs: http://localhost:3128 for an HTTP proxy (GET
	// and CONNECT), socks5://localhost:1080 for a SOCKS5 one; one address
	// speaking both is listed twice. The probes try a proxy the box's
	// HTTP_PROXY, HTTPS_PROXY, ALL_PROXY or FTP_PROXY names only when it is
	// one of these, on loopback: the box's environment is the box's, and
	// it never points a probe anywhere the target did not declare.
	Proxies []string `yaml:"proxies,omitempty"`
	// Limits are what the platform declares; the runner enforces them
	// through the cgroup it puts the wrapper in (nofile is declared only:
	// the wrapper sets its own rlimits or not).
	Limits targets.Limits `yaml:"limits,omitempty"`
}

// File is one settings file of the wrapper.
type File struct {
	// Source is the host file, relative to the target file.
	Source string `yaml:"source"`
	// Path is where it goes, relative to ${WORKDIR}.
	Path string `yaml:"path"`
}

var _ targets.Section = (*Config)(nil)

// The placeholders of Argv.
const (
	VarArgv      = "${ARGV}"
	VarArgvShell = "${ARGV_SHELL}"
	VarWorkdir   = "${WORKDIR}"
	VarProbeDir  = "${PROBE_DIR}"
	VarDNS       = "${DNS}"
)

// defaultPath is the PATH of a wrapper whose Env names none.
const defaultPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

var (
	numericUser = regexp.MustCompile(`^[0-9]+(:[0-9]+)?$`)
	placeholder = regexp.MustCompile(`\$\{[A-Z_]+\}`)
)

// Decode is the wrapper runner's targets.SectionDecoder: the one place its
// section is checked, against this host too (the wrapper on PATH, the
// user, the settings files), since a wrapper target names host things.
func Decode(src *targets.SectionSource) (targets.Section, error) {
	var c Config
	if err := src.Decode(&c); err != nil {
		return nil, err
	}
	if len(c.Argv) == 0 {
		src.Add("argv", "is required: the wrapper's command line, with ${ARGV} or ${ARGV_SHELL}")
	} else {
		checkArgv(src, c)
	}
	if c.User == "" {
		src.Add("user", "is required: root, or an existing user's name or uid[:gid]")
	} else if _, err := lookupUser(c.User); err != nil {
		src.Add("user", "%v", err)
	}
	switch c.Network {
	case "none", "harness", "proxy":
	case "":
		src.Add("network", "is required: none, harness or proxy (the host's own network is never used)")
	default:
		src.Add("network", "%q is not one of [none harness proxy]", c.Network)
	}
	for i, u := range c.Proxies {
		if _, err := probes.WrapperProxyEndpoint(u); err != nil {
			src.Add(fmt.Sprintf("proxies[%d]", i), "%v", err)
		}
	}
	if len(c.Proxies) > 0 && c.Network != "proxy" {
		src.Add("proxies", "are the proxies of a wrapper that filters through one: network must be proxy")
	}
	src.CheckEnv("env", c.Env)
	src.CheckLimits("limits", c.Limits)
	base := filepath.Dir(src.File)
	for i, f := range c.Files {
		p := fmt.Sprintf("files[%d]", i)
		if f.Source == "" {
			src.Add(p+".source", "is required")
		} else if fi, err := os.Stat(resolve(base, f.Source)); err != nil {
			src.Add(p+".source", "%v", err)
		} else if !fi.Mode().IsRegular() {
			src.Add(p+".source", "%s is not a regular file", resolve(base, f.Source))
		}
		if !localPath(f.Path) {
			src.Add(p+".path", "must be a relative path inside ${WORKDIR} (got %q)", f.Path)
		}
	}
	return &c, nil
}

func checkArgv(src *targets.SectionSource, c Config) {
	uses := 0
	for i, a := range c.Argv {
		for _, m := range placeholder.FindAllString(a, -1) {
			switch m {
			case VarArgv:
				if a != VarArgv {
					src.Add(fmt.Sprintf("argv[%d]", i), "%s must be a word of its own (use %s inside a word)", VarArgv, VarArgvShell)
				}
				uses++
			case VarArgvShell:
				uses++
			case VarWorkdir, VarProbeDir:
			case VarDNS:
				if c.Network != "harness" && c.Network != "proxy" {
					src.Add(fmt.Sprintf("argv[%d]", i), "%s names the harness's resolver: only with network harness or proxy (got %q)", m, c.Network)
				}
			default:
				src.Add(fmt.Sprintf("argv[%d]", i), "%s is not one of %s, %s, %s, %s, %s", m, VarArgv, VarArgvShell, VarWorkdir, VarProbeDir, VarDNS)
			}
		}
	}
	if uses != 1 {
		src.Add("argv", "must hold %s or %s exactly once (found %d)", VarArgv, VarArgvShell, uses)
	}
	if strings.Contains(c.Argv[0], "${") {
		src.Add("argv[0]", "the wrapper program must be named as it is (got %q)", c.Argv[0])
		return
	}
	if _, err := lookPath(c.Argv[0], c.path()); err != nil {
		src.Add("argv[0]", "%v", err)
	}
}

// path is the PATH the wrapper is looked up on and started with.
func (c *Config) path() string {
	if p, ok := c.Env["PATH"]; ok {
		return p
	}
	return defaultPath
}

// lookPath finds prog on path (a name with a slash is taken as it is).
func lookPath(prog, path string) (string, error) {
	if strings.Contains(prog, "/") {
		if err := executable(prog); err != nil {
			return "", fmt.Errorf("wrapper %s: %w", prog, err)
		}
		return prog, nil
	}
	for _, d := range filepath.SplitList(path) {
		if d == "" || !filepath.IsAbs(d) {
			continue
		}
		p := filepath.Join(d, prog)
		if executable(p) == nil {
			return p, nil
		}
	}
	return "", fmt.Errorf("wrapper %s is not on PATH %s (install it: make setup)", prog, path)
}

func executable(p string) error {
	fi, err := os.Stat(p)
	if err != nil {
		return err
	}
	if !fi.Mode().IsRegular() || fi.Mode().Perm()&0o111 == 0 {
		return fmt.Errorf("%s is not an executable file", p)
	}
	return nil
}

// Identity is the host account the wrapper starts as.
type Identity struct {
	// UID and GID are the account's.
	UID, GID int
	// Name is the account's name ("" for a uid without one).
	Name string
	// Home is the account's home ("" when unknown).
	Home string
}

// Root reports whether the wrapper starts as the host's root.
func (id Identity) Root() bool { return id.UID == 0 }

// lookupUser resolves root, a user name or uid[:gid] to an existing
// account.
func lookupUser(s string) (Identity, error) {
	var u *user.User
	var err error
	gid := -1
	if numericUser.MatchString(s) {
		uidS, gidS, hasG := strings.Cut(s, ":")
		u, err = user.LookupId(uidS)
		if hasG {
			gid, _ = strconv.Atoi(gidS)
		}
	} else {
		u, err = user.Lookup(s)
	}
	if err != nil {
		return Identity{}, fmt.Errorf("user %q does not exist on this host (name an existing account, or create it: useradd)", s)
	}
	uid, err := strconv.Atoi(u.Uid)
	if err != nil {
		return Identity{}, fmt.Errorf("user %q: uid %q is not a number", s, u.Uid)
	}
	if gid < 0 {
		if gid, err = strconv.Atoi(u.Gid); err != nil {
			return Identity{}, fmt.Errorf("user %q: gid %q is not a number", s, u.Gid)
		}
	}
	return Identity{UID: uid, GID: gid, Name: u.Username, Home: u.HomeDir}, nil
}

// resolve makes p absolute against base.
func resolve(base, p string) string {
	if filepath.IsAbs(p) || base == "" {
		return p
	}
	return filepath.Join(base, p)
}

// localPath: a clean relative path that stays inside its folder.
func localPath(p string) bool {
	return p != "" && filepath.IsLocal(p) && filepath.Clean(p) == p
}

// Declared: the limits the platform declares (the cgroup enforces pids,
// memory and cpus; nofile is the wrapper's own business), no egress
// profile, no identity; the environment is the harness's to expand.
func (c *Config) Declared() targets.Declared {
	l := c.Limits
	memory, _ := targets.ParseSize(l.Memory) // 0 when empty; Decode refused a bad one
	return targets.Declared{
		Limits: targets.DeclaredLimits{Pids: l.PidsLimit, CPUs: l.CPUs, Nofile: l.NoFile, MemoryBytes: memory},
	}
}
