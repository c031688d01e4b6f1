package targets

import (
	"bytes"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"

	"github.com/goccy/go-yaml"
	"github.com/goccy/go-yaml/ast"
)

// Section is one runner's section of a target file, decoded and validated
// by the runner's own package (its configuration type). The engine and the
// policy never read it: they read what it declares.
type Section interface {
	// Declared is what the section declares of its sandboxes in terms
	// every runner shares.
	Declared() Declared
}

// Declared is what a runner section declares of its sandboxes, in
// runner-neutral terms: the engine and the policy read this, never a
// runner's own keys. A zero field is something the section does not
// declare.
type Declared struct {
	// Limits are the per-sandbox limits the limit probes run past.
	Limits DeclaredLimits
	// Egress is the effective egress profile ("": the runner declares
	// none, as for a runner without a network of its own).
	Egress string
	// Tasks are the section's own launch, agent and cpu_time keys, which
	// stand for tasks:'s when it is silent (they must agree with it).
	Tasks Tasks
	// Runtime names the OCI runtime the section asks for, for the record.
	Runtime string
	// Hostname and Labels are the identity templates of each sandbox
	// (see Identity): the host name seen from inside and the labels seen
	// from outside.
	Hostname string
	Labels   map[string]string
	// Env is the environment the harness expands (its placeholders) and
	// hands the runner (nil: the runner reads its section's as written).
	Env map[string]string
	// Mounts are host folders bound into each sandbox; the harness
	// resolves their sources and plants its honeyfiles in them.
	Mounts []Mount
	// Devices are host devices put into each sandbox.
	Devices []Device
}

// SectionDecoder decodes and validates one runner's section. It returns
// an error only when the section cannot be decoded at all (the error of
// SectionSource.Decode); problems with its values go to SectionSource.Add,
// and the section is returned with them.
type SectionDecoder func(src *SectionSource) (Section, error)

// sections holds the runner sections by name (the runner's name, which is
// also the section's key). It is filled by runners.RegisterPlugin from
// each backend package's init and read-only after.
var sections = struct {
	sync.RWMutex
	m map[string]SectionDecoder
}{m: map[string]SectionDecoder{}}

// RegisterSection makes name a runner section of target files, decoded
// by dec. Backends call it through runners.RegisterPlugin; registering
// one name twice panics, a programming error.
func RegisterSection(name string, dec SectionDecoder) {
	sections.Lock()
	defer sections.Unlock()
	if _, dup := sections.m[name]; dup {
		panic("targets: runner section " + name + " registered twice")
	}
	sections.m[name] = dec
}

// SectionNames lists the registered runner sections, sorted.
func SectionNames() []string {
	sections.RLock()
	defer sections.RUnlock()
	names := make([]string, 0, len(sections.m))
	for n := range sections.m {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

func sectionDecoder(name string) (SectionDecoder, bool) {
	sections.RLock()
	defer sections.RUnlock()
	dec, ok := sections.m[name]
	return dec, ok
}

// SectionSource is one runner section as the target file holds it, handed
// to the runner's decoder with what it needs to report a problem where the
// file has it (file, line, column and YAML path).
type SectionSource struct {
	// Name is the section's key, the runner's name.
	Name string
	// Target holds the file's common keys, already decoded (a section
	// may check itself against output:, inputs: or the file's folder).
	Target *Target
	// File is the target file's name as given to Parse (Target.Path is
	// set only after the sections are decoded): a section resolves its
	// relative host paths against its folder.
	File string

	node ast.Node
	dec  *yaml.Decoder
	v    *validator
}

// Decode decodes the section strictly into cfg (an unknown key is an
// error). The decoder returns its error as it is: the file is then
// reported with that one error, as any YAML error of a target file is.
func (s *SectionSource) Decode(cfg any) error {
	if err := decodeNode(s.dec, s.node, cfg); err != nil {
		return decodeError(s.v.name, err)
	}
	return nil
}

// Add records a problem with the section's key at path, relative to the
// section ("network", "limits.memory", "cap_add[2]"; "" for the section
// itself).
func (s *SectionSource) Add(path, format string, args ...any) {
	s.v.add(s.path(path), format, args...)
}

// CheckLimits checks cgroup limits at path (relative to the section).
func (s *SectionSource) CheckLimits(path string, l Limits) { s.v.checkLimits(s.path(path), l) }

// CheckEnv checks that an environment at path (relative to the section)
// leaves the harness's SANDCHECK_ names alone.
func (s *SectionSource) CheckEnv(path string, env map[string]string) {
	s.v.checkEnv(s.path(path), env)
}

// CheckCaps checks capability names at path (relative to the section):
// without the CAP_ prefix, or ALL.
func (s *SectionSource) CheckCaps(path string, caps []string) { s.v.checkCaps(s.path(path), caps) }

// CheckIdentityVars checks that a template at path (relative to the
// section) names only the identity variables (VarRunID, VarTarget,
// VarTask).
func (s *SectionSource) CheckIdentityVars(path, template string) {
	for _, m := range identityVar.FindAllString(template, -1) {
		if m != VarRunID && m != VarTarget && m != VarTask {
			s.Add(path, "%s is not one of %s, %s, %s", m, VarRunID, VarTarget, VarTask)
		}
	}
}

func (s *SectionSource) path(rel string) string {
	switch {
	case rel == "":
		return "$." + s.Name
	case strings.HasPrefix(rel, "["):
		return "$." + s.Name + rel
	}
	return "$." + s.Name + "." + rel
}

// takeSections parses the file and takes the registered runner sections
// out of its top-level mapping, so the rest decodes strictly into Target.
// The decoder it returns has seen the whole file's anchors, so an alias
// resolves across the parts as in one decode of the file. A file the parser
// refuses yields an error. A section given as null is no section, as it
// was when sections were pointers of Target.
func takeSections(b []byte) (*yaml.Decoder, ast.Node, map[string]ast.Node, error) {
	f, err := parseFile(b)
	if err != nil {
		return nil, nil, nil, err
	}
	if len(f.Docs) != 1 || f.Docs[0] == nil || f.Docs[0].Body == nil {
		return nil, nil, nil, errors.New("not one YAML document")
	}
	body := f.Docs[0].Body
	dec := yaml.NewDecoder(bytes.NewReader(nil), yaml.DisallowUnknownField())
	var whole any
	// Its error, if any, is met again where the part holding it decodes.
	_ = decodeNode(dec, body, &whole)
	m, ok := body.(*ast.MappingNode)
	if !ok {
		// Not a mapping: Target's decoder says what is wrong with it.
		return dec, body, nil, nil
	}
	taken := map[string]ast.Node{}
	kept := m.Values[:0:0]
	for _, mv := range m.Values {
		key := ""
		if mv.Key != nil && mv.Key.GetToken() != nil {
			key = mv.Key.GetToken().Value
		}
		if _, ok := sectionDecoder(key); ok {
			if _, dup := taken[key]; !dup {
				if _, null := mv.Value.(*ast.NullNode); !null {
					taken[key] = mv.Value
				}
				continue
			}
		}
		kept = append(kept, mv)
	}
	m.Values = kept
	return dec, m, taken, nil
}

// decodeTarget decodes the file's common keys into t and its registered
// runner sections, the one runner: names into t.Section. It returns a
// decoding error (one, located), or the problems the section's decoder
// found, which Parse reports after the common keys' own.
func decodeTarget(name string, b []byte, t *Target) (Errors, error) {
	dec, rest, raw, err := takeSections(b)
	if err != nil {
		// The parser's refusal, or a shape the parser takes apart
		// differently: the whole-file decoder reports it as it always did.
		if err := decodeYAML(b, t); err != nil {
			return nil, decodeError(name, err)
		}
		return nil, nil
	}
	if err := decodeNode(dec, rest, t); err != nil {
		return nil, decodeError(name, err)
	}
	var problems Errors
	for _, key := range slices.Sorted(maps.Keys(raw)) {
		decode, _ := sectionDecoder(key)
		src := &SectionSource{Name: key, Target: t, File: name, node: raw[key], dec: dec, v: &validator{name: name, src: b}}
		sec, err := decode(src)
		if err != nil {
			return nil, err
		}
		if key != t.Runner {
			// Another runner's section: decoded, as every key of the file
			// is, but its values are that runner's business.
			continue
		}
		t.Section = sec
		problems = append(problems, src.v.errs...)
	}
	return problems, nil
}

// decodeNode decodes one node of the file with dec, a panic of the library
// being an error of the file.
func decodeNode(dec *yaml.Decoder, n ast.Node, v any) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("the YAML decoder failed on this file (%v)", p)
		}
	}()
	return dec.DecodeFromNode(n, v)
}

// inTargets are the runners whose sections package targets still decodes
// itself.
var inTargets = []string{"docker", "command", "gateway", "opensandbox", "kubernetes"}

// knownOrder is the order the unknown-runner error has always named the
// runners in; a runner registered later comes after them, by name.
var knownOrder = []string{"docker", "bwrap", "process", "command", "gateway", "opensandbox", "kubernetes"}

// knownRunners names every runner a target may name: those targets
// decodes and the registered sections.
func knownRunners() []string {
	names := append(slices.Clone(inTargets), SectionNames()...)
	var out []string
	for _, n := range knownOrder {
		if slices.Contains(names, n) {
			out = append(out, n)
		}
	}
	for _, n := range SectionNames() {
		if !slices.Contains(out, n) {
			out = append(out, n)
		}
	}
	return out
}

// article is the indefinite article before a section's name ("an
// opensandbox: section").
func article(name string) string {
	if name != "" && strings.ContainsRune("aeiou", rune(name[0])) {
		return "an"
	}
	return "a"
}
