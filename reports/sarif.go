package reports

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/sandcheck/sandcheck/evidence"
	"github.com/sandcheck/sandcheck/probes"
)

// SARIF writes the run as SARIF 2.1.0, the format code-scanning services
// (GitHub, GitLab, Azure DevOps) ingest: one rule per probe that ran (its
// description, rationale and remediation from the catalog) and one per
// criterion, one result per probe result, and one per criterion reason that
// names no probe. Results point at the target file, the thing a fix changes.
// Text from the record is plain text in SARIF (no markup is interpreted).
type SARIF struct{}

var _ Writer = SARIF{}

// Format returns "sarif".
func (SARIF) Format() string { return "sarif" }

const (
	sarifSchema  = "https://json.schemastore.org/sarif-2.1.0.json"
	sarifVersion = "2.1.0"
	toolURI      = "https://github.com/sandcheck/sandcheck"
)

type sarifLog struct {
	Schema  string     `json:"$schema"`
	Version string     `json:"version"`
	Runs    []sarifRun `json:"runs"`
}

type sarifRun struct {
	Tool        sarifTool         `json:"tool"`
	Invocations []sarifInvocation `json:"invocations"`
	Results     []sarifResult     `json:"results"`
	Properties  map[string]any    `json:"properties,omitempty"`
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
	Text string `json:"text"`
}

type sarifRule struct {
	ID                   string         `json:"id"`
	Name                 string         `json:"name"`
	ShortDescription     sarifText      `json:"shortDescription"`
	FullDescription      *sarifText     `json:"fullDescription,omitempty"`
	Help                 *sarifText     `json:"help,omitempty"`
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

// Write writes the SARIF log of rec.
func (SARIF) Write(w io.Writer, rec *evidence.Record) error {
	if rec == nil {
		return errors.New("writing sarif: record is nil")
	}
	run := sarifRun{
		Tool: sarifTool{Driver: sarifDriver{Name: "sandcheck", Version: plain(rec.Tool.Version), InformationURI: toolURI, Rules: []sarifRule{}}},
		Invocations: []sarifInvocation{{
			ExecutionSuccessful: len(rec.Errors) == 0,
			StartTimeUTC:        stamp(rec.StartedAt),
			EndTimeUTC:          stamp(rec.FinishedAt),
		}},
		Results: []sarifResult{},
		Properties: map[string]any{
			"runId": plain(rec.RunID), "target": plain(rec.Target.Name), "profile": plain(rec.Target.Profile),
			"runtime": plain(rec.Runtime), "imageDigest": plain(rec.Image.Digest), "policyVersion": plain(rec.Tool.PolicyVersion),
			"startedBy": plain(rec.StartedBy), "pass": rec.Verdict != nil && rec.Verdict.Pass,
		},
	}
	for _, e := range rec.Errors {
		run.Invocations[0].ToolExecutionNotifications = append(run.Invocations[0].ToolExecutionNotifications,
			sarifNotification{Level: "error", Message: sarifText{plain(e)}})
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
	loc := []sarifLocation{{PhysicalLocation: sarifPhysical{ArtifactLocation: sarifArtifact{URI: uri}, Region: sarifRegion{StartLine: 1}}}}
	fingerprint := func(id string) map[string]string {
		return map[string]string{"sandcheckTargetFinding/v1": plain(rec.Target.Name) + ":" + plain(id)}
	}
	for _, r := range rec.Results {
		st, msg, _ := classify(rec.Verdict, r)
		i := rule(probeRule(r))
		eff := effective(rec.Verdict, r)
		res := sarifResult{RuleID: run.Tool.Driver.Rules[i].ID, RuleIndex: i, Locations: loc,
			PartialFingerprints: fingerprint(r.Probe),
			Properties: map[string]any{"criterion": plain(r.Criterion), "reported": plain(string(r.Outcome)),
				"effective": plain(string(eff)), "expected": plain(string(r.Expected)), "sandbox": plain(r.Sandbox),
				"evidence": evidenceLines(r)}}
		switch st {
		case stateFail:
			res.Kind, res.Level = "fail", sarifLevel(r.Severity)
		case stateError:
			res.Kind, res.Level = "review", "warning"
		case stateSkipped:
			res.Kind, res.Level = "notApplicable", "none"
		default:
			res.Kind, res.Level = "pass", "none"
			msg = fmt.Sprintf("%s as expected", eff)
		}
		if !strings.HasPrefix(msg, "probe "+r.Probe+" ") {
			msg = fmt.Sprintf("probe %s: %s", r.Probe, msg)
		}
		res.Message = sarifText{plain(msg)}
		run.Results = append(run.Results, res)
	}
	if v := rec.Verdict; v != nil {
		for _, c := range v.Criteria {
			if c.Status != evidence.StatusFail && c.Status != evidence.StatusUnconfirmed {
				continue
			}
			for _, reason := range c.Reasons {
				if strings.HasPrefix(reason, "probe ") {
					continue // shown with its probe's result
				}
				i := rule(criterionRule(c.ID))
				kind, level := "fail", "error"
				if c.Status == evidence.StatusUnconfirmed {
					kind, level = "review", "warning"
				}
				run.Results = append(run.Results, sarifResult{RuleID: run.Tool.Driver.Rules[i].ID, RuleIndex: i,
					Kind: kind, Level: level, Message: sarifText{plain(reason)}, Locations: loc,
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
	rule := sarifRule{ID: plain(r.Probe), Name: ruleName(r.Probe), ShortDescription: sarifText{plain(r.Probe)},
		DefaultConfiguration: sarifConfig{Level: sarifLevel(r.Severity)},
		Properties: map[string]any{"category": plain(r.Category), "criterion": plain(r.Criterion), "severity": plain(r.Severity),
			"tags": []string{"security", plain(r.Category), plain(r.Criterion)}}}
	if s, ok := probes.Lookup(r.Probe); ok {
		rule.ShortDescription = sarifText{s.Description}
		rule.FullDescription = &sarifText{s.Rationale}
		rule.Help = &sarifText{"Remediation: " + s.Remediation}
		rule.DefaultConfiguration.Level = sarifLevel(s.Severity)
	}
	return rule
}

func criterionRule(id string) sarifRule {
	return sarifRule{ID: "criterion." + plain(id), Name: ruleName("criterion." + id),
		ShortDescription:     sarifText{"Release criterion " + plain(id)},
		DefaultConfiguration: sarifConfig{Level: "error"},
		Properties:           map[string]any{"criterion": plain(id), "tags": []string{"security", "release-criterion"}}}
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
