package engine

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/sandcheck/sandcheck/probes"
)

// fakeProc lays out a /proc: the host's own pid namespace, the box's init
// (10) with a child (11) that has two threads, a process exec'd into the
// box's namespace (12, no descendant of init) and a host process (13).
func fakeProc(t *testing.T) string {
	t.Helper()
	proc := t.TempDir()
	link := func(pid, ns string) {
		d := filepath.Join(proc, pid, "ns")
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(ns, filepath.Join(d, "pid")); err != nil {
			t.Fatal(err)
		}
	}
	task := func(pid, tid, status, children string) {
		d := filepath.Join(proc, pid, "task", tid)
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(d, "status"), []byte(status), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(d, "children"), []byte(children), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	link("self", "pid:[1]")
	link("10", "pid:[2]")
	link("11", "pid:[2]")
	link("12", "pid:[2]")
	link("13", "pid:[1]")
	task("10", "10", "Name:\tinit\nSeccomp:\t2\nSeccomp_filters:\t1\n", "11 ")
	task("11", "11", "Name:\tprobe\nSeccomp:\t2\nSeccomp_filters:\t1\n", "")
	task("11", "14", "Name:\tprobe\nSeccomp:\t2\nSeccomp_filters:\t2\n", "")
	task("12", "12", "Name:\texecd\nSeccomp:\t2\nSeccomp_filters:\t1\n", "")
	task("13", "13", "Name:\thost\nSeccomp:\t2\nSeccomp_filters:\t9\n", "")
	return proc
}

// boxTasks reads every thread of the box, exec'd processes included, and
// nothing of the host's.
func TestBoxTasksReadsTheWholeBox(t *testing.T) {
	proc := fakeProc(t)
	tasks, err := boxTasks(proc, 10)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, tk := range tasks {
		got = append(got, tk.Comm+":"+string(rune('0'+tk.Filters)))
		if tk.Comm == "host" {
			t.Errorf("a host process was read as the box's: %+v", tk)
		}
	}
	slices.Sort(got)
	if want := []string{"execd:1", "init:1", "probe:1", "probe:2"}; !slices.Equal(got, want) {
		t.Errorf("threads %v, want %v", got, want)
	}
	// A status that is a link is not followed.
	st := filepath.Join(proc, "12", "task", "12", "status")
	if err := os.Remove(st); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(proc, "13", "task", "13", "status"), st); err != nil {
		t.Fatal(err)
	}
	tasks, err = boxTasks(proc, 10)
	if err != nil {
		t.Fatal(err)
	}
	for _, tk := range tasks {
		if tk.PID == 12 {
			t.Errorf("a linked status was followed: %+v", tk)
		}
	}
}

func TestParseSeccompStatus(t *testing.T) {
	for _, tt := range []struct {
		in            string
		mode, filters int
		err           bool
	}{
		{"Name:\tx\nSeccomp:\t0\nSeccomp_filters:\t0\n", 0, 0, false},
		{"Seccomp:\t2\nSeccomp_filters:\t3\n", 2, 3, false},
		{"Seccomp:\t2\n", 2, 1, false}, // before Linux 5.9
		{"Seccomp:\t1\n", 1, 0, false},
		{"Name:\tx\n", 0, 0, true},
		{"Seccomp:\t7\n", 0, 0, true},
		{"Seccomp:\t2\nSeccomp_filters:\t-1\n", 0, 0, true},
	} {
		got, err := parseSeccompStatus([]byte(tt.in))
		if (err != nil) != tt.err || (!tt.err && (got.Mode != tt.mode || got.Filters != tt.filters)) {
			t.Errorf("parseSeccompStatus(%q) = %+v, %v; want mode %d, %d filters, error %v", tt.in, got, err, tt.mode, tt.filters, tt.err)
		}
	}
}

// More filters than the runtime's is tampering: escaped for a
// hardened-runtime probe, a note for the others.
func TestSeccompEvidenceNamesTampering(t *testing.T) {
	over := &seccompCheck{when: "the task's start", ran: true, expected: 1, tasks: 3, over: []string{`pid 7 ("probe") thread 7: Seccomp 2, 2 filter(s)`}}
	hr := probes.Spec{ID: "privilege.no-new-privs", Criterion: "hardened-runtime"}
	items := seccompEvidence(hr, over)
	if len(items) != 1 || items[0].Kind != "kernel-seccomp-tampered" || items[0].Indicates != probes.Escaped ||
		!strings.Contains(items[0].Summary, "tampering") || !strings.Contains(items[0].Summary, "runtime's 1") {
		t.Errorf("items %+v, want one escaped tampering item", items)
	}
	other := probes.Spec{ID: "resources.fork-bomb", Criterion: "bounded-resources"}
	if items := seccompEvidence(other, over); len(items) != 1 || items[0].Indicates != "" {
		t.Errorf("items %+v, want one note", items)
	}
	if items := seccompEvidence(other, &seccompCheck{ran: true, expected: 1}); len(items) != 0 {
		t.Errorf("a clean check adds %+v to a probe no refusal settles", items)
	}
	if items := seccompEvidence(hr, &seccompCheck{when: "x", reason: "no pid"}); len(items) != 1 || items[0].Kind != "kernel-seccomp-unchecked" {
		t.Errorf("items %+v, want the unchecked note", items)
	}
}
