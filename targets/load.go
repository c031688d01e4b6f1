package targets

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/goccy/go-yaml"
	"github.com/goccy/go-yaml/ast"
	"github.com/goccy/go-yaml/parser"

	"github.com/sandcheck/sandcheck/internal/yamlbound"
	"github.com/sandcheck/sandcheck/probes"
)

// MaxFileSize bounds a target file.
const MaxFileSize = 1 << 20

// Error is one problem in a target file, located by line and column when the
// field exists in the file.
type Error struct {
	File   string
	Line   int
	Column int
	Field  string // a YAML path such as $.docker.runtime
	Msg    string
}

func (e *Error) Error() string {
	loc := e.File
	if e.Line > 0 {
		loc = fmt.Sprintf("%s:%d:%d", e.File, e.Line, e.Column)
	}
	if e.Field != "" {
		return fmt.Sprintf("%s: %s: %s", loc, e.Field, e.Msg)
	}
	return fmt.Sprintf("%s: %s", loc, e.Msg)
}

// Errors is every problem found in one file.
type Errors []*Error

func (es Errors) Error() string {
	s := make([]string, len(es))
	for i, e := range es {
		s[i] = e.Error()
	}
	return strings.Join(s, "\n")
}

// ErrInvalid is wrapped by every validation failure, so callers can tell bad
// input from I/O trouble.
var ErrInvalid = errors.New("invalid target")

// Load reads, decodes and validates a target file.
func Load(path string) (*Target, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("reading target %s: %w", path, err)
	}
	defer f.Close()
	var buf bytes.Buffer
	if _, err := buf.ReadFrom(ioLimit(f, MaxFileSize+1)); err != nil {
		return nil, fmt.Errorf("reading target %s: %w", path, err)
	}
	if buf.Len() > MaxFileSize {
		return nil, fmt.Errorf("%w: %s: larger than %d bytes", ErrInvalid, path, MaxFileSize)
	}
	return Parse(path, buf.Bytes())
}

// Parse decodes and validates target file content; name is used in errors
// and to resolve relative paths.
func Parse(name string, b []byte) (*Target, error) {
	if err := checkShape(name, b); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	var t Target
	problems, err := decodeTarget(name, b, &t)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	sum := sha256.Sum256(b)
	t.Path, t.Digest, t.src = name, "sha256:"+hex.EncodeToString(sum[:]), b
	v := validator{name: name, src: b}
	v.check(&t)
	// The runner section's problems come after the common keys', where
	// the runner's check has always put them.
	v.errs = append(v.errs, problems...)
	if len(v.errs) > 0 {
		return nil, fmt.Errorf("%w: %w", ErrInvalid, v.errs)
	}
	return &t, nil
}

// checkShape bounds the file before the YAML parser sees it (size, nesting,
// aliases) and wants exactly one document: a second one would be ignored.
func checkShape(name string, b []byte) error {
	lim := yamlbound.Default
	lim.MaxBytes = MaxFileSize
	sh, err := yamlbound.Check(b, lim)
	var be *yamlbound.Error
	switch {
	case errors.As(err, &be):
		return &Error{File: name, Line: be.Line, Msg: be.Msg}
	case err != nil:
		return &Error{File: name, Msg: err.Error()}
	case sh.Documents == 0:
		return &Error{File: name, Msg: "the file is empty (no YAML document)"}
	case sh.Documents > 1:
		return &Error{File: name, Msg: fmt.Sprintf("holds %d YAML documents; a target file holds exactly one", sh.Documents)}
	}
	return nil
}

// decodeYAML decodes strictly (unknown fields are errors). The YAML library
// panics on some malformed input (a tag on a sequence entry, found by
// FuzzParse): that is a malformed file, not a crash of the harness.
func decodeYAML(b []byte, v any) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("the YAML decoder failed on this file (%v)", p)
		}
	}()
	return yaml.NewDecoder(bytes.NewReader(b), yaml.DisallowUnknownField()).Decode(v)
}

// parseFile parses for positions, a panic of the library being an error.
func parseFile(b []byte) (f *ast.File, err error) {
	defer func() {
		if p := recover(); p != nil {
			f, err = nil, fmt.Errorf("the YAML parser failed on this file (%v)", p)
		}
	}()
	return parser.ParseBytes(b, 0)
}

func decodeError(name string, err error) error {
	var se yaml.Error
	if errors.As(err, &se) {
		if tk := se.GetToken(); tk != nil && tk.Position != nil {
			return &Error{File: name, Line: tk.Position.Line, Column: tk.Position.Column, Msg: se.GetMessage()}
		}
		return &Error{File: name, Msg: se.GetMessage()}
	}
	return &Error{File: name, Msg: err.Error()}
}

type validator struct {
	name string
	src  []byte
	errs Errors
}

// add records a problem at the YAML path, located in the source when present.
func (v *validator) add(path, format string, args ...any) {
	e := &Error{File: v.name, Field: path, Msg: fmt.Sprintf(format, args...)}
	if p, err := yaml.PathString(path); err == nil {
		if f, err := parseFile(v.src); err == nil {
			if n, err := p.FilterFile(f); err == nil && n != nil {
				if pos := n.GetToken().Position; pos != nil {
					e.Line, e.Column = pos.Line, pos.Column
				}
			}
		}
	}
	v.errs = append(v.errs, e)
}

var (
	namePattern       = regexp.MustCompile(`^[a-z0-9][a-z0-9._-]{0,62}$`)
	capPattern        = regexp.MustCompile(`^[A-Z][A-Z_]{1,30}$`)
	devicePermPattern = regexp.MustCompile(`^r?w?m?$`)
	sizePattern       = regexp.MustCompile(`^[0-9]+(k|Ki|K|m|M|Mi|g|G|Gi)?$`)
)

func (v *validator) check(t *Target) {
	if t.Schema != Schema {
		v.add("$.schema", "must be %q, got %q", Schema, t.Schema)
	}
	if !namePattern.MatchString(t.Name) {
		v.add("$.name", "must be lower-case letters, digits, '.', '_' or '-' (got %q)", t.Name)
	}
	if t.Image == "" && t.Runner == "docker" {
		v.add("$.image", "is required")
	}
	if !slices.Contains(probes.Profiles, t.Profile) {
		v.add("$.profile", "%q is not one of %v", t.Profile, probes.Profiles)
	}
	if t.Output != nil {
		v.checkOutput(t.Output)
	}
	if t.Inputs != nil {
		v.checkInputs(t.Inputs, t.Output)
	}
	if t.ImageVerify != nil {
		v.checkImageVerify(t.ImageVerify)
	}
	if t.Attribution != nil {
		v.checkAttribution(t.Attribution)
	}
	if t.Broker != nil {
		v.checkBroker(t.Broker)
	}
	v.checkTasks(t)
	if _, ok := sectionDecoder(t.Runner); ok {
		// A runner whose package owns its section: its decoder checked it.
		if t.Section == nil {
			v.add("$.runner", "runner %s needs %s %s: section", t.Runner, article(t.Runner), t.Runner)
		}
		return
	}
	switch t.Runner {
	case "docker":
		if t.Docker == nil {
			v.add("$.runner", "runner docker needs a docker: section")
			return
		}
		v.checkDocker(t.Docker)
		v.checkCPUTime(t.Docker)
		if t.Output != nil {
			v.checkOutputClash(t.Output, t.Docker)
		}
		if t.Inputs != nil {
			v.checkInputsClash(t.Inputs, t.Docker)
		}
	case "command":
		if t.Command == nil {
			v.add("$.runner", "runner command needs a command: section")
			return
		}
		v.checkCommand(t.Command)
	case "gateway":
		if t.Gateway == nil {
			v.add("$.runner", "runner gateway needs a gateway: section")
			return
		}
		v.checkGateway(t.Gateway)
	case "opensandbox":
		if t.OpenSandbox == nil {
			v.add("$.runner", "runner opensandbox needs an opensandbox: section")
			return
		}
		v.checkOpenSandbox(t)
	case "kubernetes":
		if t.Kubernetes == nil {
			v.add("$.runner", "runner kubernetes needs a kubernetes: section")
			return
		}
		v.checkKubernetes(t.Kubernetes)
	case "":
		v.add("$.runner", "is required")
	default:
		v.add("$.runner", "%q is not a known runner (known: %s)", t.Runner, strings.Join(knownRunners(), ", "))
	}
}

func (v *validator) checkDocker(d *Docker) {
	oneOf := func(path, val string, allowed ...string) {
		if !slices.Contains(allowed, val) {
			v.add(path, "%q is not one of %v", val, allowed)
		}
	}
	oneOf("$.docker.runtime", d.Runtime, "runc", "runsc")
	if d.Launch != "" {
		oneOf("$.docker.launch", d.Launch, "exec", "task")
	}
	if d.Agent != "" {
		oneOf("$.docker.agent", d.Agent, "root", "none")
	}
	if d.Seccomp != "" && d.Seccomp != "default" && d.Seccomp != "unconfined" && !strings.HasSuffix(d.Seccomp, ".json") {
		v.add("$.docker.seccomp", "must be default, unconfined or a path to a .json profile (got %q)", d.Seccomp)
	}
	if d.AppArmor != "" {
		oneOf("$.docker.apparmor", d.AppArmor, "default", "unconfined")
	}
	if d.SystemPaths != "" {
		oneOf("$.docker.system_paths", d.SystemPaths, "masked", "unconfined")
	}
	for i, c := range d.CapAdd {
		if !capPattern.MatchString(c) || strings.HasPrefix(c, "CAP_") {
			v.add(fmt.Sprintf("$.docker.cap_add[%d]", i), "%q is not a capability name without the CAP_ prefix (or ALL)", c)
		}
	}
	for i, c := range d.CapDrop {
		if !capPattern.MatchString(c) || strings.HasPrefix(c, "CAP_") {
			v.add(fmt.Sprintf("$.docker.cap_drop[%d]", i), "%q is not a capability name without the CAP_ prefix (or ALL)", c)
		}
	}
	for i, tm := range d.Tmpfs {
		p := fmt.Sprintf("$.docker.tmpfs[%d]", i)
		if !filepath.IsAbs(tm.Path) {
			v.add(p+".path", "must be an absolute path (got %q)", tm.Path)
		}
		// No size is a tmpfs bounded only by the kernel's default (half
		// the host's memory), as Docker mounts one: run as declared and
		// graded by the probes, never refused.
		if n, err := ParseSize(tm.Size); tm.Size != "" && (err != nil || n <= 0) {
			v.add(p+".size", "must be a size such as 16Mi, or left out for no cap of its own (got %q)", tm.Size)
		}
		if tm.NrInodes < 0 {
			v.add(p+".nr_inodes", "must not be negative")
		}
	}
	if d.ShmSize != "" {
		if n, err := ParseSize(d.ShmSize); err != nil || n <= 0 {
			v.add("$.docker.shm_size", "must be a size such as 8Mi (got %q)", d.ShmSize)
		}
	}
	seenUlimit := map[string]bool{}
	for i, u := range d.Ulimits {
		p := fmt.Sprintf("$.docker.ulimits[%d]", i)
		switch {
		case !slices.Contains(UlimitNames, u.Name):
			v.add(p+".name", "%q is not one of %v", u.Name, UlimitNames)
		case seenUlimit[u.Name]:
			v.add(p+".name", "%s is listed twice", u.Name)
		}
		seenUlimit[u.Name] = true
		if u.Soft < 0 || u.Hard < 0 || u.Soft > u.Hard {
			v.add(p, "soft %d and hard %d must be non-negative with soft <= hard", u.Soft, u.Hard)
		}
	}
	if d.PidsLimit < 0 {
		v.add("$.docker.pids_limit", "must not be negative")
	}
	if d.Memory != "" {
		if n, err := ParseSize(d.Memory); err != nil || n < 6<<20 {
			v.add("$.docker.memory", "must be a size of at least 6Mi such as 128Mi (got %q)", d.Memory)
		}
	}
	if d.CPUs < 0 {
		v.add("$.docker.cpus", "must not be negative")
	}
	if d.Network == "" {
		v.add("$.docker.network", "is required: none, harness or a Docker network name")
	} else if strings.HasPrefix(d.Network, "container:") {
		v.add("$.docker.network", "%q joins another container's network namespace, which sandcheck cannot start or observe; describe that container's own network instead", d.Network)
	}
	if d.Egress != "" {
		switch {
		case !slices.Contains(EgressProfiles, d.Egress):
			v.add("$.docker.egress", "%q is not one of %v", d.Egress, EgressProfiles)
		case d.Network == "none" && d.Egress != EgressNone:
			v.add("$.docker.egress", "%q needs a network, but docker.network is none", d.Egress)
		}
	}
	for i, m := range d.Mounts {
		p := fmt.Sprintf("$.docker.mounts[%d]", i)
		if m.Source == "" {
			v.add(p+".source", "is required")
		} else if _, _, err := resolveSource(m.Source, "/", "/run-dir"); err != nil {
			v.add(p+".source", "%q %v", m.Source, err)
		}
		if !filepath.IsAbs(m.Target) || filepath.Clean(m.Target) == "/" {
			v.add(p+".target", "must be an absolute path other than / (got %q)", m.Target)
		}
		if strings.HasPrefix(filepath.Clean(m.Target), "/.sandcheck") {
			v.add(p+".target", "%s is reserved for the probe binary", m.Target)
		}
	}
	if d.PID != "" {
		oneOf("$.docker.pid", d.PID, "host")
	}
	v.checkDockerHost(d)
	for i, dv := range d.Devices {
		p := fmt.Sprintf("$.docker.devices[%d]", i)
		if dv.Source != BlockCanarySource && (!filepath.IsAbs(dv.Source) || filepath.Clean(dv.Source) != dv.Source) {
			v.add(p+".source", "must be a clean absolute path or %s (got %q)", BlockCanarySource, dv.Source)
		}
		if !filepath.IsAbs(dv.Target) || filepath.Clean(dv.Target) != dv.Target || !strings.HasPrefix(dv.Target, "/dev/") {
			v.add(p+".target", "must be a clean absolute path under /dev/ (got %q)", dv.Target)
		}
		if !devicePermPattern.MatchString(dv.Permissions) {
			v.add(p+".permissions", "must be a combination of r, w and m (got %q)", dv.Permissions)
		}
	}
	for k := range d.Env {
		if strings.HasPrefix(k, "SANDCHECK_") {
			v.add("$.docker.env."+k, "the SANDCHECK_ prefix is reserved for the harness")
		}
	}
	v.checkIdentity(d)
}

// ParseSize reads sizes such as 128Mi, 512M, 1G or 4096 (bytes). Binary and
// decimal suffixes are both read as binary multiples, as Docker does.
func ParseSize(s string) (int64, error) {
	if !sizePattern.MatchString(s) {
		return 0, fmt.Errorf("size %q: want a number with an optional k, M or G suffix", s)
	}
	i := strings.IndexFunc(s, func(r rune) bool { return r < '0' || r > '9' })
	num, suf := s, ""
	if i >= 0 {
		num, suf = s[:i], s[i:]
	}
	n, err := strconv.ParseInt(num, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("size %q: %w", s, err)
	}
	shift := map[string]uint{"": 0, "k": 10, "K": 10, "Ki": 10, "m": 20, "M": 20, "Mi": 20, "g": 30, "G": 30, "Gi": 30}[suf]
	if n > (1<<62)>>shift {
		return 0, fmt.Errorf("size %q is too large", s)
	}
	return n << shift, nil
}

// RunDirVar is the mount source prefix that names the run's own folder.
const RunDirVar = "${SANDCHECK_RUN_DIR}"

// ResolveMounts returns the declared mounts with ${SANDCHECK_RUN_DIR} expanded
// and relative sources made absolute against the target file's folder. It
// creates missing sources only inside runDir, the run's own folder.
func (t *Target) ResolveMounts(runDir string) ([]Mount, error) {
	return t.resolveMounts(runDir, true)
}

// CheckMounts makes the checks ResolveMounts makes, without a run folder and
// without creating anything: a source outside the run's folder must exist.
func (t *Target) CheckMounts() error {
	_, err := t.resolveMounts("/nonexistent/sandcheck-run-dir", false)
	return err
}

func (t *Target) resolveMounts(runDir string, create bool) ([]Mount, error) {
	mounts := t.Declared().Mounts
	if mounts == nil {
		return nil, nil
	}
	base := filepath.Dir(t.Path)
	out := make([]Mount, 0, len(mounts))
	for _, m := range mounts {
		src, inRun, err := resolveSource(m.Source, base, runDir)
		if err != nil {
			return nil, fmt.Errorf("mount source %s of target %s: %w", m.Source, t.Path, err)
		}
		if _, err := os.Lstat(src); errors.Is(err, os.ErrNotExist) {
			switch {
			case !inRun:
				return nil, fmt.Errorf("mount source %s of target %s does not exist", src, t.Path)
			case create:
				if err := os.MkdirAll(src, 0o755); err != nil {
					return nil, fmt.Errorf("creating mount source %s: %w", src, err)
				}
			}
		}
		m.Source = src
		out = append(out, m)
	}
	return out, nil
}

// resolveSource expands a mount source: ${SANDCHECK_RUN_DIR} names runDir
// (and the source must stay inside it), a relative path is relative to base.
func resolveSource(source, base, runDir string) (string, bool, error) {
	if rest, ok := strings.CutPrefix(source, RunDirVar); ok {
		if rest != "" && !strings.HasPrefix(rest, "/") {
			return "", false, fmt.Errorf("%s must be followed by / or nothing", RunDirVar)
		}
		if escapesRunDir(rest) {
			return "", false, fmt.Errorf("leaves the run's folder (%s) through ..", RunDirVar)
		}
		return filepath.Join(runDir, rest), true, nil
	}
	if strings.Contains(source, RunDirVar) {
		return "", false, fmt.Errorf("%s may only start a source", RunDirVar)
	}
	src := source
	if !filepath.IsAbs(src) {
		src = filepath.Join(base, src)
	}
	return filepath.Clean(src), false, nil
}

// escapesRunDir reports whether a path below the run folder ("/a/../..")
// climbs out of it.
func escapesRunDir(rest string) bool {
	depth := 0
	for _, el := range strings.Split(rest, "/") {
		switch el {
		case "", ".":
		case "..":
			depth--
		default:
			depth++
		}
		if depth < 0 {
			return true
		}
	}
	return false
}

// SeccompPath is the seccomp setting with a profile path made absolute
// against the target file's folder (default and unconfined unchanged).
func (t *Target) SeccompPath() string {
	if t.Docker == nil {
		return ""
	}
	s := t.Docker.Seccomp
	switch {
	case s == "" || s == "default" || s == "unconfined" || filepath.IsAbs(s):
		return s
	}
	p, err := filepath.Abs(filepath.Join(filepath.Dir(t.Path), s))
	if err != nil {
		return filepath.Join(filepath.Dir(t.Path), s)
	}
	return p
}

// ResolveDevices returns the declared devices with the harness's loop device
// (BlockCanarySource) replaced by blockCanary, the path the harness made.
func (t *Target) ResolveDevices(blockCanary string) ([]Device, error) {
	devices := t.Declared().Devices
	if devices == nil {
		return nil, nil
	}
	out := make([]Device, 0, len(devices))
	for _, d := range devices {
		if d.Source == BlockCanarySource {
			if blockCanary == "" {
				return nil, fmt.Errorf("device %s of target %s: the harness made no block canary", d.Target, t.Path)
			}
			d.Source = blockCanary
		}
		if d.Permissions == "" {
			d.Permissions = "r"
		}
		out = append(out, d)
	}
	return out, nil
}
