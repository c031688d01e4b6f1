package engine

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"github.com/sandcheck/sandcheck/evidence"
	"github.com/sandcheck/sandcheck/internal/bounded"
	"github.com/sandcheck/sandcheck/probes"
	"github.com/sandcheck/sandcheck/runners"
	"github.com/sandcheck/sandcheck/targets"
)

// inputsPath is the harness's side of the target's inputs: a folder in the
// run's own folder, filled once with files whose content carries a per-run
// token, bound into every sandbox at the declared path (read-only when the
// target says so). The harness never writes it again, so any change the
// host finds there was made from inside a sandbox.
type inputsPath struct {
	decl    *targets.Inputs
	dir     string            // the host folder
	planted map[string][]byte // file name -> content
}

// Bounds of the host's look at the inputs folder after a probe: the folder
// is written from inside the box on a target that mounts it writable.
const (
	inputsMaxEntries = 256
	inputsMaxRead    = 64 << 10
)

// setupInputs plants the inputs and adds their mount to the docker
// configuration.
func (e *Engine) setupInputs(env *runners.RunEnv) error {
	decl := e.target.Inputs
	if decl == nil {
		return nil
	}
	in := &inputsPath{decl: decl, dir: filepath.Join(e.runDir, "inputs"), planted: map[string][]byte{}}
	// Writable by every user of the box, as the output bind is: only the
	// mount's read-only flag may stand between a task and its inputs, so
	// that is what persistence.inputs-writable measures.
	if err := os.Mkdir(in.dir, 0o777); err != nil {
		return fmt.Errorf("creating inputs folder: %w", err)
	}
	if err := os.Chmod(in.dir, 0o777); err != nil {
		return fmt.Errorf("creating inputs folder: %w", err)
	}
	tok := newToken(e.rec.RunID)
	for name, content := range map[string]string{
		"task.md":     "# Task\nSummarise records.csv. Run " + e.rec.RunID + ", input token " + tok + "-task.\n",
		"records.csv": "id,name,amount\n1,alpha,10\n2,beta,20\n3," + tok + "-records,30\n",
		"notes.txt":   "Inputs handed to the task by the platform (sandcheck " + tok + "-notes).\n",
	} {
		p := filepath.Join(in.dir, name)
		if err := os.WriteFile(p, []byte(content), 0o666); err != nil {
			return fmt.Errorf("planting input %s: %w", name, err)
		}
		if err := os.Chmod(p, 0o666); err != nil {
			return fmt.Errorf("planting input %s: %w", name, err)
		}
		in.planted[name] = []byte(content)
	}
	env.Mounts = append(slices.Clone(env.Mounts), targets.Mount{Source: in.dir, Target: decl.Path, ReadOnly: decl.ReadOnly})
	e.in = in
	e.rec.Target.Inputs = &evidence.TargetInputs{Path: decl.Path, Source: in.dir, ReadOnly: decl.ReadOnly}
	return nil
}

// inputsParams name the inputs folder to the probe.
func (e *Engine) inputsParams(p *probes.Params) {
	if e.in != nil {
		p.InputsDir = e.in.decl.Path
	}
}

// isInputsMount reports whether a runtime mount is the harness's own
// read-only inputs bind: the folder it made for the run and filled with the
// task's inputs only, which is the platform handing inputs over, not a host
// folder leaking in. A writable one still counts as a host mount.
func (e *Engine) isInputsMount(source, dest string, readOnly bool) bool {
	return e.in != nil && readOnly && filepath.Clean(source) == e.in.dir && filepath.Clean(dest) == e.in.decl.Path
}

// viewForFacts is the runtime view the host's facts are drawn from: for the
// mounts fact, without the harness's own read-only inputs bind (see
// isInputsMount), which is noted instead.
func (e *Engine) viewForFacts(host string, v *runners.RuntimeView) *runners.RuntimeView {
	if host != "runtime:mounts" || e.in == nil {
		return v
	}
	c := *v
	c.Mounts = nil
	for _, m := range v.Mounts {
		if m.Type == "bind" && e.isInputsMount(m.Source, m.Destination, m.ReadOnly) {
			continue
		}
		c.Mounts = append(c.Mounts, m)
	}
	return &c
}

// inputsEvidence is the host's account of the inputs after one probe ran:
// "inputs:read" joins the proofs the probe reported with the planted
// content, "inputs:intact" compares the host folder with what was planted.
func (e *Engine) inputsEvidence(kind string, token string, self selfReport) evidence.Item {
	it := evidence.Item{Source: evidence.SourceInputs, Kind: kind}
	if e.in == nil {
		it.Kind, it.Summary = "inputs-undeclared", "the target declares no inputs folder"
		return it
	}
	switch kind {
	case "inputs:read":
		got := map[string]bool{}
		for i, p := range strings.Fields(self.Fields["proofs"]) {
			if i >= 32 {
				break
			}
			got[p] = true
		}
		var read, missed []string
		for _, name := range sortedKeys(e.in.planted) {
			if got[probes.InputsProof(token, e.in.planted[name])] {
				read = append(read, name)
			} else {
				missed = append(missed, name)
			}
		}
		it.Data = map[string]string{"read": fmt.Sprint(len(read)), "planted": fmt.Sprint(len(e.in.planted))}
		if len(missed) == 0 {
			it.Indicates = probes.Escaped
			it.Summary = fmt.Sprintf("the task proved it read all %d input files the harness planted: %s", len(read), strings.Join(read, ", "))
		} else {
			it.Indicates = probes.Blocked
			it.Summary = fmt.Sprintf("the task proved reading %d of the %d planted input files; not: %s", len(read), len(e.in.planted), strings.Join(missed, ", "))
		}
	case "inputs:intact":
		changes, mine, err := e.in.changes(token)
		switch {
		case err != nil:
			it.Summary = "the host could not check the inputs folder: " + err.Error()
		case len(changes) == 0:
			it.Indicates = probes.Blocked
			it.Summary = fmt.Sprintf("the inputs folder on the host is as the harness planted it (%d files)", len(e.in.planted))
		default:
			it.Indicates = probes.Escaped
			it.Data = map[string]string{"token": token, "by_this_probe": fmt.Sprint(mine)}
			it.Summary = truncate(fmt.Sprintf("the inputs folder on the host was changed from inside (by this probe's token: %t): %s", mine, strings.Join(changes, "; ")), 400)
		}
	default:
		it.Summary = "unknown inputs check " + kind
	}
	return it
}

// changes lists how the host folder differs from what was planted, never
// following a link, and whether one change carries the token.
func (in *inputsPath) changes(token string) (changes []string, mine bool, err error) {
	f, err := os.Open(in.dir)
	if err != nil {
		return nil, false, fmt.Errorf("opening inputs folder: %w", err)
	}
	ents, err := f.ReadDir(inputsMaxEntries + 1)
	f.Close()
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, false, fmt.Errorf("listing inputs folder: %w", err)
	}
	if len(ents) > inputsMaxEntries {
		changes = append(changes, fmt.Sprintf("more than %d entries", inputsMaxEntries))
	}
	seen := map[string]bool{}
	for _, de := range ents {
		name := de.Name()
		want, planted := in.planted[name]
		if !planted {
			changes = append(changes, fmt.Sprintf("added %q (%s)", truncate(name, 80), entryKind(de.Type())))
			mine = mine || strings.Contains(name, token)
			continue
		}
		seen[name] = true
		got, err := bounded.ReadRegular(filepath.Join(in.dir, name), inputsMaxRead)
		switch {
		case err != nil:
			changes = append(changes, fmt.Sprintf("%s replaced: %v", name, err))
		case !bytes.Equal(got, want):
			changes = append(changes, name+" changed")
			mine = mine || bytes.Contains(got, []byte(token))
		}
	}
	for _, name := range sortedKeys(in.planted) {
		if !seen[name] {
			changes = append(changes, name+" removed")
		}
	}
	return changes, mine, nil
}

func sortedKeys[V any](m map[string]V) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

// entryKind names a folder entry's type in a word.
func entryKind(m os.FileMode) string {
	switch {
	case m.IsRegular():
		return "file"
	case m.IsDir():
		return "folder"
	case m&os.ModeSymlink != 0:
		return "link"
	default:
		return "special file"
	}
}
