package reports

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"
	"unicode"

	"github.com/sandcheck/sandcheck/evidence"
	"github.com/sandcheck/sandcheck/probes"
)

// SARIF writes the run as SARIF 2.1.0 for code-scanning services (GitHub,
// GitLab): only what needs a person, a result per failed or unconfirmed
// probe and per failed or unconfirmed criterion reason that names no probe
// shown (passes, waived and not-applicable results are left out, so a
// scanner opens no alert for a check that held). A failed result is kind
// "fail" at the level of the probe's severity; an unconfirmed one is kind
// "review" at level "none", as SARIF §3.27.9-10 require. Each rule carries
// the catalog's description, rationale and remediation, a helpUri into
// docs/probes.md and a "security-severity" from the probe's severity. The
// run's automationDetails.id is per target, so uploads for several targets
// do not replace each other. Results point at the line of the target file
// whose key decides them, when the file on disk is still the one the run
// used (its digest matches); else at its first line. Text from the record is
// plain text in SARIF (no markup is interpreted).
type SARIF struct{}

var _ Writer = SARIF{}

// Format returns "sarif".
func (SARIF) Format() string { return "sarif" }

const (
	sarifSchema  = "https://json.schemastore.org/sarif-2.1.0.json"
	sarifVersion = "2.1.0"
	toolURI      = "https://github.com/sandcheck/sandcheck"
	// docsURI is where the rules' helpUri point.
	docsURI = toolURI + "/blob/main/docs/"
)

type sarifLog struct {
	Schema  string     `json:"$schema"`
	Version string     `json:"version"`
	Runs    []sarifRun `json:"runs"`
}

type sarifRun struct {
	Tool              sarifTool         `json:"tool"`
	AutomationDetails sarifAutomation   `json:"automationDetails"`
	Invocations       []sarifInvocation `json:"invocations"`
	Results           []sarifResult     `json:"results"`
	Properties        map[string]any    `json:"properties,omitempty"`
}

type sarifAutomation struct {
	ID string `json:"id"`
}

type sarifTool struct {
	Driver sarifDriver `json:"driver"`
}

type sarifDriver struct {
	Name           string      `json:"name"`
	Version        string      `json:"version,omitempty"`
	InformationURI string      `json:"informationUri"`
	Rules          []sarifRule `json:"rules"`
}

type sarifText struct {
	Text     string `json:"text"`
	Markdown string `json:"markdown,omitempty"`
}

type sarifRule struct {
	ID                   string         `json:"id"`
	Name                 string         `json:"name"`
	ShortDescription     sarifText      `json:"shortDescription"`
	FullDescription      *sarifText     `json:"fullDescription,omitempty"`
	Help                 *sarifText     `json:"help,omitempty"`
	HelpURI              string         `json:"helpUri,omitempty"`
	DefaultConfiguration sarifConfig    `json:"defaultConfiguration"`
	Properties           map[string]any `json:"properties,omitempty"`
}

type sarifConfig struct {
	Level string `json:"level"`
}

type sarifInvocation struct {
	ExecutionSuccessful        bool                `json:"executionSuccessful"`
	StartTimeUTC               string              `json:"startTimeUtc,omitempty"`
	EndTimeUTC                 string              `json:"endTimeUtc,omitempty"`
	ToolExecutionNotifications []sarifNotification `json:"toolExecutionNotifications,omitempty"`
}

type sarifNotification struct {
	Level   string    `json:"level"`
	Message sarifText `json:"message"`
}

type sarifResult struct {
	RuleID              string            `json:"ruleId"`
	RuleIndex           int               `json:"ruleIndex"`
	Kind                string            `json:"kind"`
	Level               string            `json:"level"`
	Message             sarifText         `json:"message"`
	Locations           []sarifLocation   `json:"locations"`
	PartialFingerprints map[string]string `json:"partialFingerprints"`
	Properties          map[string]any    `json:"properties,omitempty"`
}

type sarifLocation struct {
	PhysicalLocation sarifPhysical `json:"physicalLocation"`
}

type sarifPhysical struct {
	ArtifactLocation sarifArtifact `json:"artifactLocation"`
	Region           sarifRegion   `json:"region"`
}

type sarifArtifact struct {
	URI string `json:"uri"`
}

type sarifRegion struct {
	StartLine int `json:"startLine"`
}

// sarifLevel maps a probe's severity to the level of a failed result.
func sarifLevel(severity string) string {
	switch severity {
	case "critical", "high":
		return "error"
	case "medium", "low":
		return "warning"
	}
	return "note"
}

// securitySeverity is the CVSS-like score GitHub reads from a rule's
// "security-severity" property to rank alerts: critical ≥ 9, high ≥ 7,
// medium ≥ 4, low > 0.
func securitySeverity(severity string) string {
	switch severity {
	case "critical":
		return "9.5"
	case "high":
		return "8.0"
	case "medium":
		return "5.5"
	case "low":
		return "3.0"
	}
	return "0.0"
}

// Write writes the SARIF log of rec.
func (SARIF) Write(w io.Writer, rec *evidence.Record) error {
	if rec == nil {
		return errors.New("writing sarif: record is nil")
	}
	run := sarifRun{
		Tool:              sarifTool{Driver: sarifDriver{Name: "sandcheck", Version: plain(rec.Tool.Version), InformationURI: toolURI, Rules: []sarifRule{}}},
		AutomationDetails: sarifAutomation{ID: automationID(rec)},
		Invocations: []sarifInvocation{{
			ExecutionSuccessful: len(rec.Errors) == 0,
			StartTimeUTC:        stamp(rec.StartedAt),
			EndTimeUTC:          stamp(rec.FinishedAt),
		}},
		Results: []sarifResult{},
		Properties: map[string]any{
			"runId": plain(rec.RunID), "target": plain(rec.Target.Name), "profile": plain(rec.Target.Profile),
			"runner": plain(rec.Runner), "runtime": plain(rec.Runtime), "imageDigest": plain(rec.Image.Digest),
			"policyVersion": plain(rec.Tool.PolicyVersion), "startedBy": plain(rec.StartedBy),
			"pass": rec.Verdict != nil && rec.Verdict.Pass,
		},
	}
	for _, e := range rec.Errors {
		run.Invocations[0].ToolExecutionNotifications = append(run.Invocations[0].ToolExecutionNotifications,
			sarifNotification{Level: "error", Message: sarifText{Text: plain(e)}})
	}
	if rec.Verdict != nil {
		// The verdict's warnings (a waiver of a whole criterion among
		// them) open no alert but must not go unseen.
		for _, m := range rec.Verdict.Warnings {
			run.Invocations[0].ToolExecutionNotifications = append(run.Invocations[0].ToolExecutionNotifications,
				sarifNotification{Level: "warning", Message: sarifText{Text: plain(m)}})
		}
	}
	index := map[string]int{}
	rule := func(r sarifRule) int {
		if i, ok := index[r.ID]; ok {
			return i
		}
		index[r.ID] = len(run.Tool.Driver.Rules)
		run.Tool.Driver.Rules = append(run.Tool.Driver.Rules, r)
		return index[r.ID]
	}
	uri := targetURI(rec.Target.Path)
	at := locator{src: targetSource(rec.Target.Path, rec.Target.Digest), runner: rec.Runner}
	loc := func(probe, criterion string) []sarifLocation {
		return []sarifLocation{{PhysicalLocation: sarifPhysical{ArtifactLocation: sarifArtifact{URI: uri},
			Region: sarifRegion{StartLine: at.line(probe, criterion)}}}}
	}
	fingerprint := func(id string) map[string]string {
		return map[string]string{"sandcheckTargetFinding/v1": plain(rec.Target.Name) + ":" + plain(stableText(rec, id))}
	}
	shown := map[string]bool{}
	counts := map[string]int{}
	run.Properties["results"] = counts
	for _, r := range rec.Results {
		st, msg, _ := classify(rec.Verdict, r)
		counts[string(st)]++
		var kind, level string
		switch st {
		case stateFail:
			kind, level = "fail", sarifLevel(severityOf(r))
		case stateError:
			kind, level = "review", "none"
		default:
			continue // passes, waived, not applicable and not tested open no alert
		}
		shown[r.Probe] = true
		i := rule(probeRule(r))
		eff := effective(rec.Verdict, r)
		if !strings.HasPrefix(msg, "probe "+r.Probe+" ") {
			msg = fmt.Sprintf("probe %s: %s", r.Probe, msg)
		}
		run.Results = append(run.Results, sarifResult{RuleID: run.Tool.Driver.Rules[i].ID, RuleIndex: i,
			Kind: kind, Level: level, Message: sarifText{Text: plain(msg)}, Locations: loc(r.Probe, r.Criterion),
			PartialFingerprints: fingerprint(r.Probe),
			Properties: map[string]any{"criterion": plain(r.Criterion), "reported": plain(string(r.Outcome)),
				"effective": plain(string(eff)), "expected": plain(string(r.Expected)), "sandbox": plain(r.Sandbox),
				"evidence": evidenceLines(r)}})
	}
	if v := rec.Verdict; v != nil {
		for _, c := range v.Criteria {
			if c.Status != evidence.StatusFail && c.Status != evidence.StatusUnconfirmed {
				continue
			}
			seen := map[string]bool{}
			for _, reason := range c.Reasons {
				if p, ok := reasonProbe(reason); ok && shown[p] {
					continue // shown with its probe's result
				}
				// The same finding in every sandbox of the run is one alert,
				// and its fingerprint must not carry the run's sandbox names.
				reason = withoutSandbox(reason)
				if seen[reason] {
					continue
				}
				seen[reason] = true
				i := rule(criterionRule(c.ID))
				kind, level := "fail", "error"
				if c.Status == evidence.StatusUnconfirmed {
					kind, level = "review", "none"
				}
				run.Results = append(run.Results, sarifResult{RuleID: run.Tool.Driver.Rules[i].ID, RuleIndex: i,
					Kind: kind, Level: level, Message: sarifText{Text: plain(reason)}, Locations: loc("", c.ID),
					PartialFingerprints: fingerprint("criterion." + c.ID + ":" + reason)})
			}
		}
	}
	b, err := json.MarshalIndent(sarifLog{Schema: sarifSchema, Version: sarifVersion, Runs: []sarifRun{run}}, "", "  ")
	if err != nil {
		return fmt.Errorf("writing sarif: %w", err)
	}
	if _, err := w.Write(append(b, '\n')); err != nil {
		return fmt.Errorf("writing sarif: %w", err)
	}
	return nil
}

// automationID names the run for code scanning: "sandcheck/<target>/" is
// the category (GitHub keeps one set of alerts per category), the run ID the
// instance.
func automationID(rec *evidence.Record) string {
	name := strings.NewReplacer("/", "-", " ", "-").Replace(sanitize(rec.Target.Name))
	if name == "" {
		name = "target"
	}
	return "sandcheck/" + name + "/" + strings.ReplaceAll(sanitize(rec.RunID), "/", "-")
}

// reasonProbe returns the probe a verdict reason is about ("probe <id> ...").
func reasonProbe(reason string) (string, bool) {
	rest, ok := strings.CutPrefix(reason, "probe ")
	if !ok {
		return "", false
	}
	id, _, _ := strings.Cut(rest, " ")
	return id, id != ""
}

// severityOf is the catalog's severity of a probe, else the record's.
func severityOf(r evidence.Result) string {
	if s, ok := probes.Lookup(r.Probe); ok {
		return s.Severity
	}
	return r.Severity
}

// docsAnchor is the anchor GitHub gives a Markdown heading: lower case,
// punctuation but "-" and "_" dropped, spaces as "-".
func docsAnchor(heading string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(heading) {
		switch {
		case r == ' ':
			b.WriteRune('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

// targetURI is the target file as a relative URI when it is relative (code
// scanning resolves it against the repository), else a file URI.
func targetURI(path string) string {
	p := strings.ReplaceAll(plain(path), "\\", "/")
	switch {
	case p == "":
		return "sandcheck-target"
	case strings.HasPrefix(p, "/"):
		return "file://" + p
	}
	return strings.TrimPrefix(p, "./")
}

// probeRule is the rule of one probe: the catalog's words when the probe is
// in this build's catalog, else what the record says of it.
func probeRule(r evidence.Result) sarifRule {
	sev := severityOf(r)
	rule := sarifRule{ID: plain(r.Probe), Name: ruleName(r.Probe), ShortDescription: sarifText{Text: plain(r.Probe)},
		DefaultConfiguration: sarifConfig{Level: sarifLevel(sev)},
		Properties: map[string]any{"category": plain(r.Category), "criterion": plain(r.Criterion), "severity": plain(sev),
			"security-severity": securitySeverity(sev), "tags": uniq("security", plain(r.Category), plain(r.Criterion))}}
	if s, ok := probes.Lookup(r.Probe); ok {
		rule.ShortDescription = sarifText{Text: s.Description}
		rule.FullDescription = &sarifText{Text: s.Rationale}
		rule.Help = &sarifText{Text: "Remediation: " + s.Remediation,
			Markdown: "**Remediation:** " + s.Remediation + "\n\n**Why it matters:** " + s.Rationale}
		rule.HelpURI = docsURI + "probes.md#" + docsAnchor(s.ID)
	}
	return rule
}

func criterionRule(id string) sarifRule {
	sev := "high"
	for _, s := range probes.Catalog() {
		if s.Criterion == id && s.Severity == "critical" {
			sev = "critical"
		}
	}
	return sarifRule{ID: "criterion." + plain(id), Name: ruleName("criterion." + id),
		ShortDescription:     sarifText{Text: "Release criterion " + plain(id)},
		HelpURI:              docsURI + "policy.md#" + docsAnchor("The criteria and what grades them"),
		DefaultConfiguration: sarifConfig{Level: sarifLevel(sev)},
		Properties: map[string]any{"criterion": plain(id), "security-severity": securitySeverity(sev),
			"tags": []string{"security", "release-criterion"}}}
}

// ruleName turns a dotted ID into the PascalCase name SARIF viewers show.
func ruleName(id string) string {
	var b strings.Builder
	up := true
	for _, r := range plain(id) {
		switch {
		case r == '.' || r == '-' || r == '_':
			up = true
		case up:
			b.WriteString(strings.ToUpper(string(r)))
			up = false
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

// evidenceLines are a result's evidence items, one line each, sorted by
// source so the host's observations read together.
func evidenceLines(r evidence.Result) []string {
	out := make([]string, 0, len(r.Evidence))
	for _, it := range r.Evidence {
		out = append(out, plain(itemLine(it)))
	}
	sort.SliceStable(out, func(i, j int) bool { return strings.SplitN(out[i], "/", 2)[0] < strings.SplitN(out[j], "/", 2)[0] })
	return out
}

// uniq drops repeated and empty strings, keeping the first of each (SARIF
// tags must be unique).
func uniq(ss ...string) []string {
	var out []string
	for _, s := range ss {
		if s != "" && !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	return out
}

// withoutSandbox drops the leading "sandbox <name> " of a verdict reason:
// sandbox names carry the run's ID, so a reason without it reads the same in
// every sandbox and every run.
func withoutSandbox(reason string) string {
	rest, ok := strings.CutPrefix(reason, "sandbox ")
	if !ok {
		return reason
	}
	if _, after, ok := strings.Cut(rest, " "); ok && after != "" {
		return after
	}
	return reason
}
