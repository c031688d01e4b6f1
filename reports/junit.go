package reports

import (
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/sandcheck/sandcheck/evidence"
	"github.com/sandcheck/sandcheck/probes"
)

// JUnit writes JUnit XML: a testsuite "criteria" with one testcase per
// release criterion, then one testsuite per probe category with one testcase
// per result (named by probe ID, classname its criterion). A criterion that
// failed is a <failure> even when no probe result stands behind it (a
// writable engine socket, a writable root filesystem), one that could not be
// confirmed an <error>, one waived or not tested <skipped>; so the test view
// is red exactly when the verdict fails. A result is a <failure> when its
// criterion failed because of it or its effective outcome is not the
// expected one, an <error> when it is inconclusive or unconfirmed, and
// <skipped> when not applicable, waived or not tested (never a pass). encoding/xml escapes all text and
// plain removes what could mislead a reader, so hostile details stay data.
type JUnit struct{}

var _ Writer = JUnit{}

// Format returns "junit".
func (JUnit) Format() string { return "junit" }

type junitSuites struct {
	XMLName  xml.Name     `xml:"testsuites"`
	Name     string       `xml:"name,attr"`
	Tests    int          `xml:"tests,attr"`
	Failures int          `xml:"failures,attr"`
	Errors   int          `xml:"errors,attr"`
	Skipped  int          `xml:"skipped,attr"`
	Time     string       `xml:"time,attr"`
	Suites   []junitSuite `xml:"testsuite"`
}

type junitSuite struct {
	Name       string          `xml:"name,attr"`
	Tests      int             `xml:"tests,attr"`
	Failures   int             `xml:"failures,attr"`
	Errors     int             `xml:"errors,attr"`
	Skipped    int             `xml:"skipped,attr"`
	Time       string          `xml:"time,attr"`
	Timestamp  string          `xml:"timestamp,attr,omitempty"`
	Properties []junitProperty `xml:"properties>property"`
	Cases      []junitCase     `xml:"testcase"`
}

type junitProperty struct {
	Name  string `xml:"name,attr"`
	Value string `xml:"value,attr"`
}

type junitCase struct {
	Name      string        `xml:"name,attr"`
	Classname string        `xml:"classname,attr"`
	Time      string        `xml:"time,attr"`
	Failure   *junitMessage `xml:"failure,omitempty"`
	Error     *junitMessage `xml:"error,omitempty"`
	Skipped   *junitMessage `xml:"skipped,omitempty"`
}

type junitMessage struct {
	Message string `xml:"message,attr,omitempty"`
	Type    string `xml:"type,attr,omitempty"`
	Body    string `xml:",chardata"`
}

// Write writes the JUnit report of rec.
func (JUnit) Write(w io.Writer, rec *evidence.Record) error {
	if rec == nil {
		return errors.New("writing junit: record is nil")
	}
	doc := junitDoc(rec)
	if _, err := io.WriteString(w, xml.Header); err != nil {
		return fmt.Errorf("writing junit: %w", err)
	}
	enc := xml.NewEncoder(w)
	enc.Indent("", "  ")
	if err := enc.Encode(doc); err != nil {
		return fmt.Errorf("writing junit: %w", err)
	}
	if _, err := io.WriteString(w, "\n"); err != nil {
		return fmt.Errorf("writing junit: %w", err)
	}
	return nil
}

func junitDoc(rec *evidence.Record) junitSuites {
	props := junitProperties(rec)
	byCat := map[string][]evidence.Result{}
	for _, r := range rec.Results {
		byCat[r.Category] = append(byCat[r.Category], r)
	}
	doc := junitSuites{Name: "sandcheck", Time: seconds(rec.Timing.TotalSeconds)}
	if rec.Verdict != nil {
		s := junitSuite{Name: "criteria", Properties: props, Time: seconds(0)}
		if !rec.StartedAt.IsZero() {
			s.Timestamp = rec.StartedAt.UTC().Format(time.RFC3339)
		}
		for _, c := range rec.Verdict.Criteria {
			s.Cases = append(s.Cases, criterionCase(c))
		}
		doc.add(s)
	}
	for _, cat := range categoryOrder(byCat) {
		s := junitSuite{Name: plain(cat), Properties: props}
		if !rec.StartedAt.IsZero() {
			s.Timestamp = rec.StartedAt.UTC().Format(time.RFC3339)
		}
		var total float64
		for _, r := range byCat[cat] {
			c := junitTestcase(rec.Verdict, r)
			total += r.Seconds
			s.Cases = append(s.Cases, c)
		}
		s.Time = seconds(total)
		doc.add(s)
	}
	return doc
}

// add appends a suite, counting its cases into it and into the document.
func (d *junitSuites) add(s junitSuite) {
	s.Tests, s.Failures, s.Errors, s.Skipped = len(s.Cases), 0, 0, 0
	for _, c := range s.Cases {
		switch {
		case c.Failure != nil:
			s.Failures++
		case c.Error != nil:
			s.Errors++
		case c.Skipped != nil:
			s.Skipped++
		}
	}
	d.Tests += s.Tests
	d.Failures += s.Failures
	d.Errors += s.Errors
	d.Skipped += s.Skipped
	d.Suites = append(d.Suites, s)
}

// criterionCase is the testcase of one release criterion: its reasons are
// the body, the first one the message.
func criterionCase(c evidence.Criterion) junitCase {
	tc := junitCase{Name: plain(c.ID), Classname: "criterion", Time: seconds(0)}
	first := ""
	if len(c.Reasons) > 0 {
		first = c.Reasons[0]
	}
	m := &junitMessage{Message: plain(first), Type: plain(c.Status), Body: plain(strings.Join(c.Reasons, "\n"))}
	switch c.Status {
	case evidence.StatusPass:
	case evidence.StatusFail:
		tc.Failure = m
	case evidence.StatusWaived, evidence.StatusNotTested:
		tc.Skipped = &junitMessage{Message: plain(c.Status + ": " + first)}
	default: // unconfirmed, or a status this build does not know: never a pass
		tc.Error = m
	}
	return tc
}

// categoryOrder lists the catalog's categories first, in catalog order, then
// any others the record names, sorted.
func categoryOrder(byCat map[string][]evidence.Result) []string {
	var out, extra []string
	for _, c := range probes.Categories {
		if _, ok := byCat[c]; ok {
			out = append(out, c)
		}
	}
	for c := range byCat {
		if !slices.Contains(probes.Categories, c) {
			extra = append(extra, c)
		}
	}
	sort.Strings(extra)
	return append(out, extra...)
}

func junitProperties(rec *evidence.Record) []junitProperty {
	verdict := "ungraded"
	if rec.Verdict != nil {
		verdict = "fail"
		if rec.Verdict.Pass {
			verdict = "pass"
		}
	}
	props := []junitProperty{
		{"run_id", rec.RunID},
		{"target", rec.Target.Name},
		{"profile", rec.Target.Profile},
		{"runner", rec.Runner},
		{"runtime", rec.Runtime},
		{"image", rec.Image.Ref},
		{"image_digest", rec.Image.Digest},
		{"policy_version", rec.Tool.PolicyVersion},
		{"verdict", verdict},
	}
	if rec.Verdict != nil {
		// The verdict's warnings (a waiver of a whole criterion among
		// them), one property each.
		for _, m := range rec.Verdict.Warnings {
			props = append(props, junitProperty{"warning", m})
		}
	}
	for i := range props {
		props[i].Value = plain(props[i].Value)
	}
	return props
}

func junitTestcase(v *evidence.Verdict, r evidence.Result) junitCase {
	c := junitCase{Name: plain(r.Probe), Classname: plain(r.Criterion), Time: seconds(r.Seconds)}
	st, msg, cites := classify(v, r)
	m := &junitMessage{Message: plain(msg), Type: plain(string(effective(v, r))), Body: plain(junitBody(v, r, cites))}
	switch st {
	case stateFail:
		c.Failure = m
	case stateError:
		c.Error = m
	case stateSkipped, stateNotTested:
		c.Skipped = &junitMessage{Message: plain(msg)}
	}
	return c
}

// junitBody lists the verdict's reasons about the result, then what the
// probe and the host observed.
func junitBody(v *evidence.Verdict, r evidence.Result, cites []citation) string {
	var b strings.Builder
	for _, c := range cites {
		fmt.Fprintf(&b, "%s: %s\n", c.status, c.reason)
	}
	fmt.Fprintf(&b, "reported: %s, expected: %s, effective: %s\n", r.Outcome, r.Expected, effective(v, r))
	if r.Detail != "" {
		fmt.Fprintf(&b, "detail: %s\n", r.Detail)
	}
	for _, it := range r.Evidence {
		fmt.Fprintf(&b, "evidence: %s\n", itemLine(it))
	}
	return b.String()
}

func seconds(s float64) string { return fmt.Sprintf("%.3f", s) }
