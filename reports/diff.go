package reports

import (
	"bytes"
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"

	"github.com/sandcheck/sandcheck/evidence"
)

// Change is one material difference between two runs: something the threat
// model says to rerun the abuse tests after (runtime, kernel, image,
// network, policy), or what was tested (target, profile, tool).
type Change struct {
	What string `json:"what"`
	Old  string `json:"old"`
	New  string `json:"new"`
}

// ResultChange is how one probe's result moved between two runs.
type ResultChange struct {
	Probe    string `json:"probe"`
	Severity string `json:"severity"`
	Old      string `json:"old"` // shown state in the old run ("" when absent)
	New      string `json:"new"`
	// Message is the new run's reason (for a new failure) or the old one's
	// (for a fix); for changed evidence, what changed.
	Message string `json:"message,omitempty"`
}

// RunDiff is what changed from one run to the next.
type RunDiff struct {
	Old, New        RunRef         `json:"-"`
	Material        []Change       `json:"material"`
	NewFailures     []ResultChange `json:"new_failures"`
	Fixed           []ResultChange `json:"fixed"`
	ChangedEvidence []ResultChange `json:"changed_evidence"`
	OtherChanges    []ResultChange `json:"other_changes"`
	Added           []string       `json:"added,omitempty"`
	Removed         []string       `json:"removed,omitempty"`
	Criteria        []Change       `json:"criteria"`
}

// RunRef names a run in a diff.
type RunRef struct {
	RunID, Target, Started, Verdict string
}

func refOf(rec *evidence.Record) RunRef {
	return RunRef{plain(rec.RunID), plain(rec.Target.Name), stamp(rec.StartedAt), verdictWord(rec.Verdict)}
}

func verdictWord(v *evidence.Verdict) string {
	switch {
	case v == nil:
		return "ungraded"
	case v.Pass:
		return "pass"
	}
	return "fail"
}

// Regressed reports whether the new run fails something the old one did
// not: a new failed or unconfirmed result, a criterion that newly fails, or
// a verdict that went from pass to fail.
func (d RunDiff) Regressed() bool {
	if len(d.NewFailures) > 0 || (d.Old.Verdict == "pass" && d.New.Verdict == "fail") {
		return true
	}
	for _, c := range d.Criteria {
		if isFailing(c.New) && !isFailing(c.Old) {
			return true
		}
	}
	return false
}

func isFailing(status string) bool {
	return status == evidence.StatusFail || status == evidence.StatusUnconfirmed ||
		status == string(stateFail) || status == string(stateError)
}

// Diff compares two runs: the material changes between them (runner,
// runtime, host kernel, image digest, network and egress profile, policy
// version, target, profile, sandcheck version), results that newly fail
// or were fixed, results whose host evidence changed, and criteria that
// changed status. It is what a scheduled regression job (or `run
// --baseline`) reports.
func Diff(old, cur *evidence.Record) RunDiff {
	d := RunDiff{Old: refOf(old), New: refOf(cur)}
	material := []struct{ what, o, n string }{
		{"runner", old.Runner, cur.Runner},
		{"runtime", old.Runtime, cur.Runtime},
		{"runtime version", runtimeVersion(old), runtimeVersion(cur)},
		{"host kernel", old.Host.Kernel, cur.Host.Kernel},
		{"cgroup version", fmt.Sprint(old.Host.CgroupVersion), fmt.Sprint(cur.Host.CgroupVersion)},
		{"image", old.Image.Ref, cur.Image.Ref},
		{"image digest", old.Image.Digest, cur.Image.Digest},
		{"network", networkOf(old), networkOf(cur)},
		{"egress profile", old.Target.Egress, cur.Target.Egress},
		{"policy version", old.Tool.PolicyVersion, cur.Tool.PolicyVersion},
		{"target file", old.Target.Digest, cur.Target.Digest},
		{"profile", old.Target.Profile, cur.Target.Profile},
		{"sandcheck version", old.Tool.Version, cur.Tool.Version},
	}
	for _, m := range material {
		if m.o != m.n {
			d.Material = append(d.Material, Change{m.what, plain(m.o), plain(m.n)})
		}
	}
	type seen struct {
		r   evidence.Result
		st  state
		msg string
	}
	index := func(rec *evidence.Record) map[string]seen {
		out := map[string]seen{}
		for _, r := range rec.Results {
			st, msg, _ := classify(rec.Verdict, r)
			out[r.Probe] = seen{r, st, msg}
		}
		return out
	}
	o, n := index(old), index(cur)
	var ids []string
	for id := range n {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		nr := n[id]
		or, ok := o[id]
		if !ok {
			d.Added = append(d.Added, plain(id))
			if isFailing(string(nr.st)) {
				d.NewFailures = append(d.NewFailures, ResultChange{plain(id), plain(severityOf(nr.r)), "", string(nr.st), plain(nr.msg)})
			}
			continue
		}
		rc := ResultChange{Probe: plain(id), Severity: plain(severityOf(nr.r)), Old: string(or.st), New: string(nr.st)}
		switch {
		case isFailing(string(nr.st)) && !isFailing(string(or.st)):
			rc.Message = plain(nr.msg)
			d.NewFailures = append(d.NewFailures, rc)
		case isFailing(string(or.st)) && !isFailing(string(nr.st)):
			rc.Message = plain(or.msg)
			d.Fixed = append(d.Fixed, rc)
		case or.st != nr.st:
			d.OtherChanges = append(d.OtherChanges, rc)
		default:
			if what := evidenceChange(or.r, nr.r); what != "" {
				rc.Message = what
				d.ChangedEvidence = append(d.ChangedEvidence, rc)
			}
		}
	}
	for id := range o {
		if _, ok := n[id]; !ok {
			d.Removed = append(d.Removed, plain(id))
		}
	}
	sort.Strings(d.Removed)
	bySeverity := func(rs []ResultChange) {
		sort.SliceStable(rs, func(i, j int) bool { return severityRank(rs[i].Severity) < severityRank(rs[j].Severity) })
	}
	bySeverity(d.NewFailures)
	bySeverity(d.Fixed)
	if old.Verdict != nil && cur.Verdict != nil {
		prev := map[string]string{}
		for _, c := range old.Verdict.Criteria {
			prev[c.ID] = c.Status
		}
		for _, c := range cur.Verdict.Criteria {
			if p, ok := prev[c.ID]; !ok || p != c.Status {
				d.Criteria = append(d.Criteria, Change{plain(c.ID), plain(p), plain(c.Status)})
			}
		}
	}
	return d
}

// RuntimeVersionLabel is the runtime-view label a runner sets to the
// runtime's version (runc, runsc, bwrap); Diff names a change of it. Records
// without it compare by runtime name only.
const RuntimeVersionLabel = "sandcheck.runtime-version"

// runtimeVersion is the runtime's version where the record carries one,
// else "".
func runtimeVersion(rec *evidence.Record) string {
	for _, s := range rec.Sandboxes {
		if s.View != nil && s.View.Labels[RuntimeVersionLabel] != "" {
			return s.View.Labels[RuntimeVersionLabel]
		}
	}
	return ""
}

// networkOf is the run's network as its sandboxes saw it: "none", or
// "attached" to a network (the harness's network has a per-run name, so
// only whether there is one compares across runs).
func networkOf(rec *evidence.Record) string {
	modes := map[string]bool{}
	for _, s := range rec.Sandboxes {
		if s.View == nil {
			continue
		}
		switch m := s.View.NetworkMode; {
		case m == "" || m == "none":
			modes["none"] = true
		case m == "host" || m == "bridge" || m == "default":
			modes[m] = true
		default:
			modes["attached"] = true
		}
	}
	var out []string
	for m := range modes {
		out = append(out, m)
	}
	sort.Strings(out)
	return strings.Join(out, ",")
}

// evidenceChange says how the host-observed evidence of a result changed
// (its sources, kinds and what they indicate; summaries carry per-run
// tokens and paths, so they are not compared), or "".
func evidenceChange(old, cur evidence.Result) string {
	keys := func(r evidence.Result) []string {
		var out []string
		for _, it := range r.Evidence {
			if it.Source == evidence.SourceProbe {
				continue
			}
			ind := string(it.Indicates)
			if ind == "" {
				ind = "informs"
			}
			k := it.Source + "/" + it.Kind + " (" + ind + ")"
			if !slices.Contains(out, k) {
				out = append(out, k)
			}
		}
		sort.Strings(out)
		return out
	}
	o, n := keys(old), keys(cur)
	var gone, came []string
	for _, k := range o {
		if !slices.Contains(n, k) {
			gone = append(gone, k)
		}
	}
	for _, k := range n {
		if !slices.Contains(o, k) {
			came = append(came, k)
		}
	}
	if len(gone) == 0 && len(came) == 0 {
		if old.Outcome != cur.Outcome {
			return fmt.Sprintf("self-report %s → %s", old.Outcome, cur.Outcome)
		}
		return ""
	}
	var parts []string
	if len(came) > 0 {
		parts = append(parts, "now "+strings.Join(came, ", "))
	}
	if len(gone) > 0 {
		parts = append(parts, "no longer "+strings.Join(gone, ", "))
	}
	return plain(strings.Join(parts, "; "))
}

// WriteDiffMarkdown writes d as Markdown, every record string a code span.
func WriteDiffMarkdown(w io.Writer, d RunDiff) error {
	var b bytes.Buffer
	word := "no regression"
	if d.Regressed() {
		word = "**REGRESSION**"
	}
	fmt.Fprintf(&b, "# sandcheck diff: %s\n\n", word)
	fmt.Fprintf(&b, "- Old: %s %s %s, verdict %s\n- New: %s %s %s, verdict %s\n\n",
		code(d.Old.RunID, false), code(d.Old.Target, false), code(d.Old.Started, false), code(d.Old.Verdict, false),
		code(d.New.RunID, false), code(d.New.Target, false), code(d.New.Started, false), code(d.New.Verdict, false))
	b.WriteString("## Material changes\n\n")
	if len(d.Material) == 0 {
		b.WriteString("None: same runner, runtime, kernel, image, network, policy and target.\n\n")
	} else {
		b.WriteString("| What | Old | New |\n| --- | --- | --- |\n")
		for _, c := range d.Material {
			fmt.Fprintf(&b, "| %s | %s | %s |\n", c.What, cell(c.Old), cell(c.New))
		}
		b.WriteString("\n")
	}
	section := func(title string, rs []ResultChange) {
		fmt.Fprintf(&b, "## %s (%d)\n\n", title, len(rs))
		if len(rs) == 0 {
			return
		}
		b.WriteString("| Probe | Severity | Old | New | Why |\n| --- | --- | --- | --- | --- |\n")
		for i, r := range rs {
			if i == 200 {
				fmt.Fprintf(&b, "\n%d more.\n", len(rs)-i)
				break
			}
			fmt.Fprintf(&b, "| %s | %s | %s | %s | %s |\n", cell(r.Probe), cell(r.Severity), cell(orDash(r.Old)), cell(r.New), cell(r.Message))
		}
		b.WriteString("\n")
	}
	section("New failures", d.NewFailures)
	section("Fixed", d.Fixed)
	section("Changed host evidence", d.ChangedEvidence)
	section("Other changes", d.OtherChanges)
	if len(d.Criteria) > 0 {
		b.WriteString("## Criteria that changed\n\n| Criterion | Old | New |\n| --- | --- | --- |\n")
		for _, c := range d.Criteria {
			fmt.Fprintf(&b, "| %s | %s | %s |\n", cell(c.What), cell(orDash(c.Old)), cell(c.New))
		}
		b.WriteString("\n")
	}
	if len(d.Added)+len(d.Removed) > 0 {
		fmt.Fprintf(&b, "Probes added: %d, removed: %d.\n", len(d.Added), len(d.Removed))
	}
	_, err := w.Write(b.Bytes())
	return err
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
