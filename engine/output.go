package engine

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"github.com/sandcheck/sandcheck/evidence"
	"github.com/sandcheck/sandcheck/output"
	"github.com/sandcheck/sandcheck/probes"
	"github.com/sandcheck/sandcheck/runners"
	"github.com/sandcheck/sandcheck/targets"
)

// outputPath is the harness's side of the target's output release path: a
// bind-mounted host folder inspected as-is, or a tmpfs streamed out through
// the output gate after each probe run that planted something.
//
// Why a stream from inside rather than the runtime's copy API: Docker's
// CopyFromContainer reads the container's root filesystem from the host, so
// it sees a tmpfs as its empty mount point under runc and not at all under
// gVisor (runsc keeps the tmpfs in its sentry; the copy fails), and a task
// sandbox has stopped, tmpfs gone, before the harness could ask. So the
// probe run itself ends by packing the folder as a tar (lstat, no links
// followed) framed in base64 on its standard error; the stream is as hostile
// as anything from the box and the gate on the host treats it so.
type outputPath struct {
	decl    *targets.Output
	limits  output.Limits
	bindDir string // the host folder of a bind release
	relRoot string // where gated releases are written: <out>/released

	mu       sync.Mutex
	releases map[string]*output.Release // by probe-run token
}

// setupOutput prepares the release path and adds its mount to what
// the run asks of its runner.
func (e *Engine) setupOutput(env *runners.RunEnv) error {
	o := e.target.Output
	if o == nil {
		return nil
	}
	fileBytes, totalBytes := o.OutputBounds()
	op := &outputPath{decl: o, releases: map[string]*output.Release{},
		limits: output.Limits{MaxFiles: o.MaxFiles, MaxFileBytes: fileBytes, MaxTotalBytes: totalBytes}}
	switch o.Release {
	case output.ModeBind:
		op.bindDir = filepath.Join(e.runDir, "output")
		if err := os.Mkdir(op.bindDir, 0o777); err != nil {
			return fmt.Errorf("creating output folder: %w", err)
		}
		// Any sandbox user may write it, as a careless platform allows.
		if err := os.Chmod(op.bindDir, 0o777); err != nil {
			return fmt.Errorf("creating output folder: %w", err)
		}
		env.Mounts = append(slices.Clone(env.Mounts), targets.Mount{Source: op.bindDir, Target: o.Path})
	case output.ModeGated:
		op.relRoot = filepath.Join(e.cfg.OutDir, "released")
		env.Tmpfs = append(slices.Clone(env.Tmpfs), targets.Tmpfs{Path: o.Path, Size: o.TmpfsSize()})
	}
	e.out = op
	return nil
}

// outputParams name the output folder to the probe; a gated release packs
// the folder after any run that holds an output probe.
func (e *Engine) outputParams(p *probes.Params, ids []string) {
	if e.out == nil {
		return
	}
	p.OutputDir = e.out.decl.Path
	if e.out.decl.Release == output.ModeGated && hasOutputProbe(ids) {
		l := e.out.limits
		p.Pack = &probes.PackBounds{MaxFiles: pos(l.MaxFiles, output.DefaultLimits.MaxFiles),
			MaxFileBytes:  pos(l.MaxFileBytes, output.DefaultLimits.MaxFileBytes),
			MaxTotalBytes: pos(l.MaxTotalBytes, targets.MaxGatedStream)}
	}
}

func pos[T int | int64](v, def T) T {
	if v > 0 {
		return v
	}
	return def
}

func hasOutputProbe(ids []string) bool {
	for _, id := range ids {
		if s, ok := probes.Lookup(id); ok && (slices.Contains(s.Host, "output:release") || slices.Contains(s.Host, "output:workload")) {
			return true
		}
	}
	return false
}

// collectOutput takes the release after one probe run: the gate reads the
// framed stream (gated) or inspects the host folder (bind). It records the
// release in the run record and keeps it for the probes' evidence.
func (e *Engine) collectOutput(token string, ids []string, s *sandbox, out runners.ExitResult) {
	if e.out == nil || !hasOutputProbe(ids) {
		return
	}
	var rel *output.Release
	switch e.out.decl.Release {
	case output.ModeBind:
		rel = output.Walk(e.out.bindDir, e.out.limits)
	case output.ModeGated:
		dest := filepath.Join(e.out.relRoot, token)
		if err := os.MkdirAll(dest, 0o755); err != nil {
			e.harnessError(fmt.Errorf("creating release folder: %w", err))
			return
		}
		stream, err := output.Unframe(out.Stderr)
		if err != nil {
			rel = &output.Release{Mode: output.ModeGated, Source: "tar-stream", Dest: dest, Artifacts: []output.Artifact{}, Error: err.Error()}
			break
		}
		rel = output.ReadTar(bytes.NewReader(stream), dest, e.out.limits)
	}
	e.out.mu.Lock()
	e.out.releases[token] = rel
	e.out.mu.Unlock()
	r := evidence.OutputRelease{Token: token, Sandbox: s.sb.ID(), Probes: ids, Release: rel}
	e.mu.Lock()
	e.rec.Outputs = append(e.rec.Outputs, r)
	e.mu.Unlock()
	e.emit("output-release", r)
}

// outputFlags are the flags that show each output probe's artifact in
// hostile form.
var outputFlags = map[string][]string{
	"output.symlink-out":    {output.FlagSymlinkOutside},
	"output.traversal-name": {output.FlagTraversalName, output.FlagControlName, output.FlagAbsoluteName},
	"output.special-files":  {output.FlagSpecial},
	"output.oversize":       {output.FlagOversize},
	"output.archive-bomb":   {output.FlagArchiveBomb},
	"output.secret-content": {output.FlagSecret},
	"output.eicar":          {output.FlagEICAR},
	"output.active-content": {output.FlagActiveContent, output.FlagExecutable},
}

// outputEvidence is the host's account of one output probe's artifacts in
// the release that followed its run. Bind: an artifact sitting in the host
// folder in a form the gate's inspection calls hostile escaped. Gated: an
// artifact the gate released escaped (it found nothing wrong with what the
// probe made hostile); one it withheld was blocked. No artifact at all
// settles nothing.
func (e *Engine) outputEvidence(spec probes.Spec, token string) []evidence.Item {
	it := evidence.Item{Source: evidence.SourceOutput, Kind: "output-missing"}
	if e.out == nil {
		it.Kind, it.Summary = "output-undeclared", "the target declares no output folder, so there is no release path to try"
		return []evidence.Item{it}
	}
	e.out.mu.Lock()
	rel := e.out.releases[token]
	e.out.mu.Unlock()
	if rel == nil {
		it.Summary = "the harness took no release after the probe's run"
		return []evidence.Item{it}
	}
	prefix := probes.OutputArtifactPrefix(token, spec.ID)
	var mine []output.Artifact
	for _, a := range rel.Artifacts {
		if strings.Contains(a.Path, prefix) {
			mine = append(mine, a)
		}
	}
	it.Data = map[string]string{"token": token, "mode": rel.Mode, "release": truncate(rel.Summary(), 300)}
	if len(mine) == 0 {
		it.Summary = fmt.Sprintf("no artifact named %s* in the %s release: %s", prefix, rel.Mode, truncate(rel.Summary(), 200))
		return []evidence.Item{it}
	}
	hostile := outputFlags[spec.ID]
	var released, withheld, unflagged []string
	for _, a := range mine {
		desc := describeArtifact(a)
		isHostile := slices.ContainsFunc(hostile, a.Flagged)
		switch {
		case rel.Mode == output.ModeBind && isHostile:
			released = append(released, desc)
		case rel.Mode == output.ModeBind:
			unflagged = append(unflagged, desc)
		case a.Released && a.Kind == output.KindFile:
			released = append(released, desc)
		case !a.Released:
			withheld = append(withheld, desc)
		}
	}
	it.Data["artifacts"] = truncate(strings.Join(append(append(released, withheld...), unflagged...), "; "), 400)
	switch {
	case len(released) > 0 && rel.Mode == output.ModeBind:
		it.Kind, it.Indicates = "output-released", probes.Escaped
		it.Summary = fmt.Sprintf("%d artifact(s) of the probe sit in the bind-mounted host folder as-is, in hostile form: %s", len(released), truncate(strings.Join(released, "; "), 300))
	case len(released) > 0:
		it.Kind, it.Indicates = "output-released", probes.Escaped
		it.Summary = fmt.Sprintf("the output gate released %d artifact(s) of the probe unflagged: %s", len(released), truncate(strings.Join(released, "; "), 300))
	case len(withheld) > 0:
		it.Kind, it.Indicates = "output-withheld", probes.Blocked
		it.Summary = fmt.Sprintf("the output gate withheld %d artifact(s) of the probe: %s", len(withheld), truncate(strings.Join(withheld, "; "), 300))
	default:
		it.Kind = "output-unrecognised"
		it.Summary = fmt.Sprintf("the probe's artifacts reached the release but the gate's inspection finds none hostile (want %v): %s", hostile, truncate(strings.Join(unflagged, "; "), 300))
	}
	return []evidence.Item{it}
}

func describeArtifact(a output.Artifact) string {
	d := fmt.Sprintf("%s (%s", a.Path, a.Kind)
	if a.Type != "" {
		d += ", " + a.Type
	}
	if len(a.Flags) > 0 {
		d += ", flags " + strings.Join(a.Flags, ",")
	}
	return d + ")"
}
