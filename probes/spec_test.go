package probes

import (
	"slices"
	"strings"
	"testing"
)

func TestCatalogIsValid(t *testing.T) {
	cat := Catalog()
	if len(cat) < 20 {
		t.Fatalf("catalog has %d probes, want at least 20", len(cat))
	}
	cats := map[string]bool{}
	for _, s := range cat {
		cats[s.Category] = true
		for _, l := range s.AllLabels() {
			if !slices.Contains(Labels(), l) {
				t.Errorf("%s: label %q not in the vocabulary", s.ID, l)
			}
			if strings.ContainsAny(l, "&|!,()/ ") {
				t.Errorf("%s: label %q cannot be used in a Ginkgo label filter", s.ID, l)
			}
		}
		if s.Expected("high-risk-code") == "" {
			t.Errorf("%s: no expectation for high-risk-code", s.ID)
		}
	}
	if len(cats) < 6 {
		t.Errorf("catalog covers %d categories, want at least 6", len(cats))
	}
}

func TestParseCatalogRejects(t *testing.T) {
	good := "probes:\n  - id: host.x\n    category: host\n    criterion: no-host-mount\n    severity: high\n    description: d\n    rationale: r\n    remediation: m\n    timeout: 5s\n    sandbox: shared\n    expect: {default: blocked}\n"
	if _, err := ParseCatalog([]byte(good)); err != nil {
		t.Fatalf("good catalog rejected: %v", err)
	}
	for name, bad := range map[string]string{
		"unknown field":         strings.Replace(good, "    sandbox: shared\n", "    sandbox: shared\n    color: red\n", 1),
		"unknown category":      strings.Replace(good, "category: host", "category: hosts", 1),
		"id not category":       strings.Replace(good, "id: host.x", "id: privilege.x", 1),
		"unknown criterion":     strings.Replace(good, "criterion: no-host-mount", "criterion: vibes", 1),
		"unknown label":         strings.Replace(good, "    sandbox: shared\n", "    sandbox: shared\n    labels: [shiny]\n", 1),
		"inconclusive":          strings.Replace(good, "{default: blocked}", "{default: inconclusive}", 1),
		"no default":            strings.Replace(good, "{default: blocked}", "{high-risk-code: blocked}", 1),
		"bad placement":         strings.Replace(good, "sandbox: shared", "sandbox: pooled", 1),
		"bad timeout":           strings.Replace(good, "timeout: 5s", "timeout: soon", 1),
		"duplicate":             good + strings.TrimPrefix(good, "probes:\n"),
		"not-applicable":        strings.Replace(good, "{default: blocked}", "{default: not-applicable}", 1),
		"informational blocked": strings.Replace(good, "    sandbox: shared\n", "    sandbox: shared\n    informational: true\n", 1),
	} {
		if _, err := ParseCatalog([]byte(bad)); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

func TestParseCatalogInformational(t *testing.T) {
	info := "probes:\n  - id: fingerprint.x\n    category: fingerprint\n    criterion: hardened-runtime\n    severity: info\n    description: d\n    rationale: r\n    remediation: m\n    timeout: 5s\n    sandbox: shared\n    informational: true\n    expect: {default: not-applicable}\n"
	cat, err := ParseCatalog([]byte(info))
	if err != nil {
		t.Fatalf("informational spec rejected: %v", err)
	}
	if !cat[0].Informational || cat[0].Expected("high-risk-code") != NotApplicable {
		t.Errorf("parsed %+v", cat[0])
	}
}

func TestParseResultsIsStrict(t *testing.T) {
	ok := `{"probe":"host.x","outcome":"blocked","evidence":{"errno":"EPERM"},"detail":"d"}` + "\n"
	if rs, err := ParseResults(strings.NewReader(ok + "\n" + ok)); err != nil || len(rs) != 2 {
		t.Fatalf("ParseResults(good) = %v, %v", rs, err)
	}
	for name, bad := range map[string]string{
		"unknown field":  `{"probe":"host.x","outcome":"blocked","pass":true}`,
		"bad outcome":    `{"probe":"host.x","outcome":"passed"}`,
		"bad id":         `{"probe":"../etc","outcome":"blocked"}`,
		"trailing":       `{"probe":"host.x","outcome":"blocked"} {"probe":"host.y","outcome":"blocked"}`,
		"not json":       `blocked`,
		"long line":      `{"probe":"host.x","outcome":"blocked","detail":"` + strings.Repeat("a", MaxResultLine) + `"}`,
		"long value":     `{"probe":"host.x","outcome":"blocked","evidence":{"k":"` + strings.Repeat("a", MaxEvidenceValue+1) + `"}}`,
		"bad key":        `{"probe":"host.x","outcome":"blocked","evidence":{"K Y":"v"}}`,
		"too many lines": strings.Repeat(ok, MaxResults+1),
	} {
		if _, err := ParseResults(strings.NewReader(bad)); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

func TestParseCatalogUnproven(t *testing.T) {
	base := "probes:\n  - id: teardown.x\n    category: teardown\n    criterion: verified-teardown\n    severity: high\n    description: d\n    rationale: r\n    remediation: m\n    timeout: 5s\n    sandbox: own\n    expect: {default: blocked}\n"
	cat, err := ParseCatalog([]byte(base))
	if err != nil {
		t.Fatalf("spec rejected: %v", err)
	}
	if !cat[0].Proven() {
		t.Errorf("a spec without unproven reasons must claim both controls")
	}
	withReason := base + "    unproven: {negative: no reference target lets it through}\n"
	cat, err = ParseCatalog([]byte(withReason))
	if err != nil {
		t.Fatalf("spec with a reason rejected: %v", err)
	}
	if n, p := cat[0].Controls(); cat[0].Proven() || n == "" || p != "" {
		t.Errorf("Controls() = %q, %q; Proven %t", n, p, cat[0].Proven())
	}
	for name, bad := range map[string]string{
		"empty unproven":         base + "    unproven: {}\n",
		"teardown check, shared": strings.Replace(base, "sandbox: own", "sandbox: shared", 1) + "    host: [teardown:processes]\n",
	} {
		if _, err := ParseCatalog([]byte(bad)); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	info := Spec{Informational: true}
	if n, p := info.Controls(); n == "" || p == "" {
		t.Errorf("an informational probe records why it has no controls: %q, %q", n, p)
	}
}
