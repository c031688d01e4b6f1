package main

import (
	"bytes"
	"strings"
	"testing"
)

const stream = `{"Action":"start","Package":"a"}
{"Action":"run","Package":"a","Test":"TestSlow"}
{"Action":"output","Package":"a","Test":"TestSlow","Output":"=== RUN   TestSlow\n"}
{"Action":"output","Package":"a","Test":"TestSlow","Output":"    slow_test.go:9: quiet when it passes\n"}
{"Action":"pass","Package":"a","Test":"TestSlow","Elapsed":42.5}
{"Action":"run","Package":"a","Test":"TestBad"}
{"Action":"output","Package":"a","Test":"TestBad","Output":"    bad_test.go:3: the reason it failed\n"}
{"Action":"fail","Package":"a","Test":"TestBad","Elapsed":1.25}
{"Action":"run","Package":"a","Test":"TestTool"}
{"Action":"output","Package":"a","Test":"TestTool","Output":"    tool_test.go:5: pdftotext is not installed\n"}
{"Action":"output","Package":"a","Test":"TestTool","Output":"--- SKIP: TestTool (0.00s)\n"}
{"Action":"skip","Package":"a","Test":"TestTool","Elapsed":0}
{"Action":"output","Package":"a","Output":"FAIL\n"}
{"Action":"output","Package":"a","Output":"FAIL\ta\t44.0s\n"}
{"Action":"fail","Package":"a","Elapsed":44}
go: a line of go test's own
{"Action":"start","Package":"b"}
{"Action":"run","Package":"b","Test":"TestQuick"}
{"Action":"pass","Package":"b","Test":"TestQuick","Elapsed":0.1}
{"Action":"output","Package":"b","Output":"ok  \tb\t0.2s\n"}
{"Action":"pass","Package":"b","Elapsed":0.2}
`

func TestReportPrintsFailuresSkipsAndTheSlowest(t *testing.T) {
	var w bytes.Buffer
	r := newReport(&w)
	if err := r.read(strings.NewReader(stream)); err != nil {
		t.Fatal(err)
	}
	r.summary(10)
	out := w.String()
	if !r.failed() {
		t.Error("a failed test and package: the report says nothing failed")
	}
	for _, want := range []string{
		"--- FAIL: TestBad (a, 1.25s)", "the reason it failed", "FAIL\ta\t44.0s", "ok  \tb\t0.2s",
		"go: a line of go test's own", "a TestTool: tool_test.go:5: pdftotext is not installed",
		"the 2 slowest test packages (of 2, 44 s in all)", "42.5 s  pass  a TestSlow",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("the report lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "quiet when it passes") {
		t.Errorf("a passing test's output was printed:\n%s", out)
	}
	if i, j := strings.Index(out, "a TestSlow"), strings.Index(out, "a TestBad"); i < 0 || j < 0 || i > j {
		t.Errorf("the slowest test is not listed first:\n%s", out)
	}
}

func TestReportOfPassingPackagesPasses(t *testing.T) {
	var w bytes.Buffer
	r := newReport(&w)
	i := strings.Index(stream, `{"Action":"start","Package":"b"}`)
	if err := r.read(strings.NewReader(stream[i:])); err != nil {
		t.Fatal(err)
	}
	if r.failed() {
		t.Errorf("only passes, yet failed:\n%s", w.String())
	}
}

func TestCutStreamIsAFailure(t *testing.T) {
	var w bytes.Buffer
	r := newReport(&w)
	cut := `{"Action":"start","Package":"c"}
{"Action":"run","Package":"c","Test":"TestHangs"}
{"Action":"output","Package":"c","Output":"panic: test timed out after 50m0s\n"}
`
	err := r.read(strings.NewReader(cut))
	if err == nil || !strings.Contains(err.Error(), "c") {
		t.Fatalf("a stream cut inside package c: err %v", err)
	}
	if !strings.Contains(w.String(), "panic: test timed out") {
		t.Errorf("the cut package's own output was not printed:\n%s", w.String())
	}
}

func TestBuildFailureIsAFailure(t *testing.T) {
	var w bytes.Buffer
	r := newReport(&w)
	s := `{"ImportPath":"d [d.test]","Action":"build-output","Output":"d/x.go:1:1: expected 'package'\n"}
{"ImportPath":"d [d.test]","Action":"build-fail"}
`
	if err := r.read(strings.NewReader(s)); err != nil {
		t.Fatal(err)
	}
	if !r.failed() || !strings.Contains(w.String(), "expected 'package'") {
		t.Errorf("a failed build: failed %v, output:\n%s", r.failed(), w.String())
	}
}
