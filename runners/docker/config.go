package docker

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"github.com/sandcheck/sandcheck/runners"
	"github.com/sandcheck/sandcheck/targets"
)

// maxSeccompProfile bounds a seccomp profile file.
const maxSeccompProfile = 1 << 20

var (
	// Docker's own rule for network names, minus "container:<id>" modes.
	networkPattern = regexp.MustCompile(`^[a-zA-Z0-9][a-zA-Z0-9_.-]*$`)
	capPattern     = regexp.MustCompile(`^[A-Z][A-Z0-9_]*$`)
	envNamePattern = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_.-]*$`)
)

// settings is a checked targets.Docker with everything derived that does not
// change between sandboxes.
type settings struct {
	targets.Docker
	securityOpt []string          // seccomp, apparmor, no-new-privileges
	unmaskPaths bool              // system_paths: unconfined
	tmpfs       map[string]string // path -> mount options
	memory      int64             // bytes; 0 = no limit
	shmSize     int64             // bytes; 0 = the engine's default
}

// newSettings refuses configurations that make no sense to Docker and works
// out the parts every container shares. The target loader validates the file
// itself; this guards the runner against callers that skip it.
func newSettings(d targets.Docker) (settings, error) {
	s := settings{Docker: d, tmpfs: map[string]string{}}
	s.Env = maps.Clone(d.Env)
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }

	switch d.Runtime {
	case "runc", "runsc":
	default:
		bad("runtime %q is not runc or runsc", d.Runtime)
	}
	switch d.Seccomp {
	case "", "default":
	case "unconfined":
		s.securityOpt = append(s.securityOpt, "seccomp=unconfined")
	default:
		profile, err := readSeccompProfile(d.Seccomp)
		if err != nil {
			errs = append(errs, err)
		}
		s.securityOpt = append(s.securityOpt, "seccomp="+profile)
	}
	switch d.AppArmor {
	case "", "default":
	case "unconfined":
		s.securityOpt = append(s.securityOpt, "apparmor=unconfined")
	default:
		bad("apparmor %q is not default or unconfined", d.AppArmor)
	}
	switch d.SystemPaths {
	case "", "masked":
	case "unconfined":
		s.unmaskPaths = true
	default:
		bad("system_paths %q is not masked or unconfined", d.SystemPaths)
	}
	if d.NoNewPrivileges {
		s.securityOpt = append(s.securityOpt, "no-new-privileges")
	}
	for _, c := range d.CapAdd {
		if !capPattern.MatchString(c) || c == "ALL" || strings.HasPrefix(c, "CAP_") {
			bad("cap_add %q is not a capability name without the CAP_ prefix", c)
		}
	}
	for _, c := range d.CapDrop {
		if !capPattern.MatchString(c) || strings.HasPrefix(c, "CAP_") {
			bad("cap_drop %q is not a capability name without the CAP_ prefix (or ALL)", c)
		}
	}
	for _, t := range d.Tmpfs {
		p, err := containerPath("tmpfs path", t.Path)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if _, dup := s.tmpfs[p]; dup {
			bad("tmpfs %s is listed twice", p)
		}
		exec := "noexec"
		if t.Exec {
			exec = "exec"
		}
		s.tmpfs[p] = fmt.Sprintf("rw,%s,nosuid,nodev", exec)
		// No size: the kernel's default cap (half the host's memory), as
		// Docker mounts a tmpfs given none; the probes grade it.
		if t.Size != "" {
			size, err := targets.ParseSize(t.Size)
			if err != nil || size <= 0 {
				bad("tmpfs %s: size %q is not a positive size such as 16Mi (or none, for no cap of its own)", p, t.Size)
			}
			s.tmpfs[p] += fmt.Sprintf(",size=%d", size)
		}
		switch {
		case t.NrInodes < 0:
			bad("tmpfs %s: nr_inodes %d is negative", p, t.NrInodes)
		case t.NrInodes > 0:
			s.tmpfs[p] += fmt.Sprintf(",nr_inodes=%d", t.NrInodes)
		}
	}
	if d.ShmSize != "" {
		n, err := targets.ParseSize(d.ShmSize)
		if err != nil || n <= 0 {
			bad("shm_size %q is not a positive size such as 8Mi", d.ShmSize)
		}
		s.shmSize = n
	}
	seenUlimit := map[string]bool{}
	for _, u := range d.Ulimits {
		if !slices.Contains(targets.UlimitNames, u.Name) || seenUlimit[u.Name] {
			bad("ulimit %q is unknown or listed twice", u.Name)
		}
		seenUlimit[u.Name] = true
		if u.Soft < 0 || u.Hard < 0 || u.Soft > u.Hard {
			bad("ulimit %s: soft %d and hard %d must be non-negative with soft <= hard", u.Name, u.Soft, u.Hard)
		}
	}
	if d.PidsLimit < 0 {
		bad("pids_limit %d is negative", d.PidsLimit)
	}
	if d.Memory != "" {
		n, err := targets.ParseSize(d.Memory)
		// Docker refuses less than 6 MiB.
		if err != nil || n < 6<<20 {
			bad("memory %q is not a size of at least 6Mi such as 128Mi", d.Memory)
		}
		s.memory = n
	}
	if d.CPUs < 0 || d.CPUs > 1024 {
		bad("cpus %v is out of range", d.CPUs)
	}
	if !networkPattern.MatchString(d.Network) {
		bad("network %q is not none, harness or a Docker network name", d.Network)
	}
	for _, m := range d.Mounts {
		if !filepath.IsAbs(m.Source) || filepath.Clean(m.Source) != m.Source {
			bad("mount source %q is not a clean absolute path (resolve it against the target file first)", m.Source)
		}
		if _, err := containerPath("mount target", m.Target); err != nil {
			errs = append(errs, err)
		}
	}
	switch d.PID {
	case "", "host":
	default:
		bad("pid %q is not empty or host", d.PID)
	}
	for _, dv := range d.Devices {
		if !filepath.IsAbs(dv.Source) || filepath.Clean(dv.Source) != dv.Source {
			bad("device source %q is not a clean absolute path (resolve the block canary first)", dv.Source)
		}
		if !strings.HasPrefix(dv.Target, "/dev/") || path.Clean(dv.Target) != dv.Target {
			bad("device target %q is not a clean path under /dev/", dv.Target)
		}
		if dv.Permissions == "" || strings.Trim(dv.Permissions, "rwm") != "" {
			bad("device %s: permissions %q are not a combination of r, w and m", dv.Target, dv.Permissions)
		}
	}
	for k := range d.Env {
		if !envNamePattern.MatchString(k) {
			bad("env name %q is not a variable name", k)
		}
	}
	errs = append(errs, checkHost(d.DockerHost)...)
	return s, errors.Join(errs...)
}

// checkHost guards the DockerHost settings against callers that skip the
// target loader: namespace modes Docker knows, container paths for volumes.
func checkHost(h targets.DockerHost) []error {
	var errs []error
	for _, m := range []struct{ what, val string }{{"ipc", h.IPC}, {"uts", h.UTS}, {"cgroupns", h.Cgroupns}, {"userns", h.Userns}} {
		switch m.val {
		case "", "host", "private", "shareable", "none":
		default:
			errs = append(errs, fmt.Errorf("%s mode %q is not one sandcheck can reproduce", m.what, m.val))
		}
	}
	for _, v := range h.Volumes {
		if v.Name == "" || strings.ContainsAny(v.Name, "/ ") {
			errs = append(errs, fmt.Errorf("volume name %q is not a named volume", v.Name))
		}
		if _, err := containerPath("volume target", v.Target); err != nil {
			errs = append(errs, err)
		}
	}
	return errs
}

// containerPath checks a path inside the container: absolute, clean, not /
// and not the probe mount.
func containerPath(what, p string) (string, error) {
	if !path.IsAbs(p) || path.Clean(p) != p || p == "/" {
		return "", fmt.Errorf("%s %q is not a clean absolute path other than /", what, p)
	}
	if p == runners.ProbeMount || strings.HasPrefix(p, runners.ProbeMount+"/") {
		return "", fmt.Errorf("%s %s: %s is reserved for the probe binary", what, p, runners.ProbeMount)
	}
	return p, nil
}

// readSeccompProfile returns the profile's JSON, compacted, as Docker wants it
// in "seccomp=<json>" (the engine reads no files on the client's behalf).
func readSeccompProfile(p string) (string, error) {
	if !filepath.IsAbs(p) {
		return "", fmt.Errorf("seccomp profile %q is not an absolute path (resolve it against the target file first)", p)
	}
	f, err := os.Open(p)
	if err != nil {
		return "", fmt.Errorf("reading seccomp profile: %w", err)
	}
	defer f.Close()
	raw, err := io.ReadAll(io.LimitReader(f, maxSeccompProfile+1))
	if err != nil {
		return "", fmt.Errorf("reading seccomp profile %s: %w", p, err)
	}
	if len(raw) > maxSeccompProfile {
		return "", fmt.Errorf("seccomp profile %s is larger than %d bytes", p, maxSeccompProfile)
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(raw, &obj); err != nil {
		return "", fmt.Errorf("seccomp profile %s is not a JSON object: %w", p, err)
	}
	var out bytes.Buffer
	if err := json.Compact(&out, raw); err != nil {
		return "", fmt.Errorf("compacting seccomp profile %s: %w", p, err)
	}
	return out.String(), nil
}

// checkImageRef refuses an empty or malformed image reference.
func checkImageRef(ref string) error {
	if ref == "" || strings.ContainsAny(ref, " \t\r\n") {
		return fmt.Errorf("image reference %q is empty or has blanks", ref)
	}
	return nil
}
