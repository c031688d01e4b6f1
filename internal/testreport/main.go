// Command testreport reads `go test -json` on stdin and prints what a plain
// `go test` would (each package's result line, the whole output of every test
// that failed, the package-level output of a package that failed or
// panicked), plus a line for each skipped test, and at the end the slowest
// packages and tests: so a slow CI run says where its time went.
//
// It exits 1 when a package or test failed, a build failed, or the stream
// ended with a package that never reported (go test killed, a timeout); 2
// on bad usage or a file it cannot open. Lines that are not test2json events (go
// test's own messages on stderr, merged in) are printed as they come.
//
//	go test -json ./... 2>&1 | go run ./internal/testreport [-raw FILE] [-top N] [-no-summary]
//	go run ./internal/testreport -summary [-top N] FILE...
//
// With -summary it reads streams kept with -raw (of go test runs made side by
// side) and prints only their joint summary, exiting 1 if any of them failed.
package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"time"
)

// event is one line of `go test -json` (cmd/test2json's TestEvent, plus the
// build events of Go 1.24).
type event struct {
	Time        time.Time
	Action      string
	Package     string
	ImportPath  string
	Test        string
	Elapsed     float64
	Output      string
	FailedBuild string
}

// maxLine bounds one line of the stream (a test's output line is bounded by
// test2json itself; this is the reader's own limit).
const maxLine = 4 << 20

func main() {
	raw := flag.String("raw", "", "also write the stream, unchanged, to `FILE`")
	top := flag.Int("top", 10, "how many of the slowest packages and tests to list")
	noSummary := flag.Bool("no-summary", false, "print no summary at the end (a -summary run over the kept streams prints it)")
	summaryOnly := flag.Bool("summary", false, "read the streams kept in the files named and print only their joint summary")
	flag.Parse()
	if (flag.NArg() != 0) != *summaryOnly || *top < 1 || (*summaryOnly && (*raw != "" || *noSummary)) {
		fmt.Fprintln(os.Stderr, "usage: go test -json ... | testreport [-raw FILE] [-top N] [-no-summary]\n       testreport -summary [-top N] FILE...")
		os.Exit(2)
	}
	if *summaryOnly {
		os.Exit(summarize(flag.Args(), *top))
	}
	var in io.Reader = os.Stdin
	if *raw != "" {
		f, err := os.Create(*raw)
		if err != nil {
			fmt.Fprintf(os.Stderr, "testreport: %v\n", err)
			os.Exit(2)
		}
		defer f.Close()
		in = io.TeeReader(os.Stdin, f)
	}
	// Unbuffered: a run cut short (CI's time limit) still shows every
	// failure read so far, and two streams side by side interleave by line.
	r := newReport(os.Stdout)
	err := r.read(in)
	if !*noSummary {
		r.summary(*top)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "testreport: reading the stream: %v\n", err)
		os.Exit(1)
	}
	if r.failed() {
		os.Exit(1)
	}
}

// summarize prints the joint summary of the kept streams in files and
// returns the exit code: 1 if any failed or was cut short, 2 if one cannot
// be read.
func summarize(files []string, top int) int {
	r := newReport(io.Discard)
	code := 0
	for _, f := range files {
		fh, err := os.Open(f)
		if err != nil {
			fmt.Fprintf(os.Stderr, "testreport: %v\n", err)
			return 2
		}
		err = r.read(fh)
		fh.Close()
		if err != nil {
			fmt.Fprintf(os.Stderr, "testreport: %s: %v\n", f, err)
			code = 1
		}
		r.started = map[string]bool{}
	}
	r.w = os.Stdout
	r.summary(top)
	if r.failed() {
		code = 1
	}
	return code
}

type timing struct {
	name    string
	seconds float64
	result  string
}

type report struct {
	w io.Writer
	// out holds each running test's output (package and test name) until
	// it ends: printed if it failed.
	out      map[[2]string][]string
	pkgOut   map[string][]string
	started  map[string]bool // packages that began and have not ended
	packages []timing
	tests    []timing
	skips    []string
	fails    int
	builds   int
}

func newReport(w io.Writer) *report {
	return &report{w: w, out: map[[2]string][]string{}, pkgOut: map[string][]string{}, started: map[string]bool{}}
}

func (r *report) read(in io.Reader) error {
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 0, 64<<10), maxLine)
	for sc.Scan() {
		line := sc.Bytes()
		var e event
		if len(line) == 0 || line[0] != '{' || json.Unmarshal(line, &e) != nil || e.Action == "" {
			fmt.Fprintf(r.w, "%s\n", line)
			continue
		}
		r.event(e)
	}
	if err := sc.Err(); err != nil {
		return err
	}
	if len(r.started) > 0 {
		var left []string
		for p := range r.started {
			left = append(left, p)
		}
		sort.Strings(left)
		for _, p := range left {
			for _, l := range r.pkgOut[p] {
				fmt.Fprint(r.w, l)
			}
		}
		return errors.New("the stream ended before these packages reported (go test killed or timed out): " + strings.Join(left, " "))
	}
	return nil
}

func (r *report) event(e event) {
	switch e.Action {
	case "build-output":
		fmt.Fprint(r.w, e.Output)
		return
	case "build-fail":
		r.builds++
		return
	}
	key := [2]string{e.Package, e.Test}
	switch e.Action {
	case "start":
		r.started[e.Package] = true
	case "run":
		r.out[key] = nil
	case "output":
		if e.Test == "" {
			r.pkgOut[e.Package] = append(r.pkgOut[e.Package], e.Output)
			if strings.HasPrefix(e.Output, "ok  ") || strings.HasPrefix(e.Output, "FAIL") || strings.HasPrefix(e.Output, "?   ") {
				fmt.Fprint(r.w, e.Output)
			}
			return
		}
		if len(r.out[key]) < 20000 {
			r.out[key] = append(r.out[key], e.Output)
		}
	case "pass", "fail", "skip":
		if e.Test == "" {
			delete(r.started, e.Package)
			if e.Action == "fail" {
				r.fails++
				// The package's own output (a panic, a timeout, TestMain's
				// words) without the lines already printed.
				for _, l := range r.pkgOut[e.Package] {
					if !strings.HasPrefix(l, "ok  ") && !strings.HasPrefix(l, "FAIL") {
						fmt.Fprint(r.w, l)
					}
				}
			}
			delete(r.pkgOut, e.Package)
			if e.Action != "skip" {
				r.packages = append(r.packages, timing{e.Package, e.Elapsed, e.Action})
			}
			return
		}
		lines := r.out[key]
		delete(r.out, key)
		switch e.Action {
		case "fail":
			r.fails++
			fmt.Fprintf(r.w, "--- FAIL: %s (%s, %.2fs)\n", e.Test, e.Package, e.Elapsed)
			for _, l := range lines {
				fmt.Fprint(r.w, l)
			}
		case "skip":
			why := skipReason(lines)
			r.skips = append(r.skips, fmt.Sprintf("%s %s: %s", e.Package, e.Test, why))
		}
		if !strings.Contains(e.Test, "/") {
			r.tests = append(r.tests, timing{e.Package + " " + e.Test, e.Elapsed, e.Action})
		}
	}
}

// skipReason is the last line a skipped test logged (t.Skip's message).
func skipReason(lines []string) string {
	for i := len(lines) - 1; i >= 0; i-- {
		l := strings.TrimSpace(lines[i])
		if l == "" || strings.HasPrefix(l, "--- SKIP") || strings.HasPrefix(l, "=== ") {
			continue
		}
		if len(l) > 300 {
			l = l[:300] + "..."
		}
		return l
	}
	return "(no reason given)"
}

func (r *report) failed() bool { return r.fails > 0 || r.builds > 0 }

func (r *report) summary(top int) {
	slowest := func(title string, ts []timing) {
		sort.SliceStable(ts, func(i, j int) bool { return ts[i].seconds > ts[j].seconds })
		var total float64
		for _, t := range ts {
			total += t.seconds
		}
		fmt.Fprintf(r.w, "\n=== the %d slowest %s (of %d, %.0f s in all)\n", min(top, len(ts)), title, len(ts), total)
		for i, t := range ts {
			if i == top {
				break
			}
			fmt.Fprintf(r.w, "  %8.1f s  %-4s  %s\n", t.seconds, t.result, t.name)
		}
	}
	slowest("test packages", r.packages)
	slowest("tests", r.tests)
	if len(r.skips) > 0 {
		fmt.Fprintf(r.w, "\n=== %d tests skipped\n", len(r.skips))
		for _, s := range r.skips {
			fmt.Fprintf(r.w, "  %s\n", s)
		}
	}
	if r.builds > 0 {
		fmt.Fprintf(r.w, "\n=== %d packages failed to build\n", r.builds)
	}
}
