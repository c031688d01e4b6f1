package engine

import (
	"bytes"
	"fmt"
	"sort"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/sandcheck/sandcheck/evidence"
	"github.com/sandcheck/sandcheck/probes"
	"github.com/sandcheck/sandcheck/runners"
)

// selfReport is what the host makes of a probe's own output.
type selfReport struct {
	Outcome probes.Outcome
	Detail  string
	Items   []evidence.Item
	// Fields are the probe's evidence fields, for host-side joins.
	Fields map[string]string
	// hung and notRun mark, in a batch cut at its budget, the probe that
	// hung it and the probes after it that never ran (batch.go).
	hung, notRun bool
}

// interpretAll reads one probe invocation's output for the probes asked of
// it. The output comes from inside the sandbox: anything but exactly one
// well-formed result for each probe asked for, and nothing else, makes every
// result inconclusive, never blocked.
func interpretAll(ids []string, out runners.ExitResult) map[string]selfReport {
	all := func(r selfReport) map[string]selfReport {
		m := make(map[string]selfReport, len(ids))
		for _, id := range ids {
			m[id] = r
		}
		return m
	}
	bad := func(format string, args ...any) map[string]selfReport {
		d := fmt.Sprintf(format, args...)
		return all(selfReport{Outcome: probes.Inconclusive, Detail: d, Items: []evidence.Item{{
			Source: evidence.SourceProbe, Kind: "malformed-output", Summary: d,
			Data: map[string]string{"exit_code": fmt.Sprint(out.ExitCode), "stderr_tail": tail(out.Stderr, 300)},
		}}})
	}
	if out.Truncated {
		return bad("probe output exceeded %d bytes and was cut", runners.MaxOutput)
	}
	if out.ExitCode != 0 {
		return bad("probe exited with code %d%s: %s", out.ExitCode, exitCause(out.ExitCode), orNoStderr(tail(out.Stderr, 200)))
	}
	rs, err := probes.ParseResults(bytes.NewReader(out.Stdout))
	if err != nil {
		return bad("probe output rejected: %v", err)
	}
	want := map[string]bool{}
	for _, id := range ids {
		want[id] = true
	}
	got := map[string]probes.Result{}
	for _, r := range rs {
		if !want[r.Probe] {
			return bad("probe output has a result for %s, which was not asked for", r.Probe)
		}
		if _, dup := got[r.Probe]; dup {
			return bad("probe output has two results for %s", r.Probe)
		}
		got[r.Probe] = r
	}
	if len(got) != len(ids) {
		return bad("probe output has %d results for %d probes asked for", len(got), len(ids))
	}
	m := make(map[string]selfReport, len(ids))
	for id, r := range got {
		m[id] = selfFrom(r)
	}
	return m
}

func selfFrom(r probes.Result) selfReport {
	keys := make([]string, 0, len(r.Evidence))
	for k := range r.Evidence {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var parts []string
	for _, k := range keys {
		parts = append(parts, k+"="+r.Evidence[k])
	}
	return selfReport{Outcome: r.Outcome, Detail: r.Detail, Fields: r.Evidence, Items: []evidence.Item{{
		Source: evidence.SourceProbe, Kind: "self-report", Summary: truncate(strings.Join(parts, " "), 400),
		Indicates: r.Outcome, Data: r.Evidence,
	}}}
}

func tail(b []byte, n int) string {
	s := strings.ToValidUTF8(string(b), "?")
	if len(s) > n {
		s = "..." + s[len(s)-n:]
	}
	return strings.TrimSpace(s)
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}

// exitCause names the signal of a shell-style exit code past 128 (137 is
// SIGKILL: the OOM killer's, a watchdog's or anyone's).
func exitCause(code int) string {
	if code <= 128 || code > 128+64 {
		return ""
	}
	sig := unix.Signal(code - 128)
	if name := unix.SignalName(sig); name != "" {
		return " (killed by " + name + ")"
	}
	return fmt.Sprintf(" (killed by signal %d)", code-128)
}

// orNoStderr says so when the probe printed nothing on stderr.
func orNoStderr(s string) string {
	if strings.TrimSpace(s) == "" {
		return "no error output"
	}
	return s
}
