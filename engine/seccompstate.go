package engine

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sandcheck/sandcheck/evidence"
	"github.com/sandcheck/sandcheck/internal/bounded"
	"github.com/sandcheck/sandcheck/probes"
	"github.com/sandcheck/sandcheck/runners"
)

// The kernel's own word on whose seccomp filter refused a call: the host
// reads Seccomp and Seccomp_filters of every thread of the box from
// /proc and holds them to what the runtime installs (the runner's
// SeccompCounter). A box cannot remove a filter, nor hide one from /proc,
// so a thread with more filters than the runtime's installed its own (or
// descends from one that did), whatever flags it used and whatever stream
// of events it made first. The tracer then covers what comes after: every
// later attempt to add a filter is a call it counts (trace.go).
//
// The check runs at each task's start (before its go-ahead, after its watch
// began: a box's first process may have filtered itself before either)
// and at each exec'd probe's end.

// Bounds of one check: the threads it reads, and the bytes of each status.
const (
	maxSeccompTasks = 8192
	statusBytes     = 16 << 10
)

// seccompTask is one thread of the box as /proc shows it.
type seccompTask struct {
	PID, TID int
	Comm     string
	Mode     int // Seccomp: 0 none, 1 strict, 2 filter
	Filters  int // Seccomp_filters
}

// seccompCheck is one reading of the box's seccomp state.
type seccompCheck struct {
	when string
	// ran is set when the host read every thread it found and knew what
	// the runtime installs; reason says why not otherwise.
	ran      bool
	reason   string
	expected int
	tasks    int
	// over lists the threads with more filters than the runtime's (or in
	// strict mode); unwatched those the tracer does not attribute.
	over      []string
	unwatched []string
}

// clean reports whether the check ran and found nothing the box did.
func (c *seccompCheck) clean() bool {
	return c != nil && c.ran && len(c.over) == 0 && len(c.unwatched) == 0
}

// why says, for a check that is not clean, what keeps it from vouching.
func (c *seccompCheck) why() string {
	switch {
	case c == nil:
		return "the host did not read the box's seccomp state"
	case !c.ran:
		return "the host could not read the box's seccomp state at " + c.when + ": " + c.reason
	case len(c.over) > 0:
		return fmt.Sprintf("at %s the kernel shows threads of the box with more seccomp filters than the runtime's %d: %s", c.when, c.expected, strings.Join(c.over, "; "))
	default:
		return fmt.Sprintf("at %s %d thread(s) of the box were outside the tracer's watch: %s", c.when, len(c.unwatched), strings.Join(c.unwatched, "; "))
	}
}

// checkSeccomp reads the box's seccomp state now; with watched, it also
// asks the tracer whether each thread is in the sandbox's watch (at a
// task's start, when nothing from outside is entering the box).
func (e *Engine) checkSeccomp(ctx context.Context, s *sandbox, when string, watched bool) *seccompCheck {
	c := &seccompCheck{when: when}
	hp, ok := s.sb.(runners.HostPIDer)
	if !ok {
		c.reason = "its runner cannot name the box's host pid"
		return c
	}
	sc, ok := s.sb.(runners.SeccompCounter)
	if !ok {
		c.reason = "its runner cannot say how many seccomp filters its runtime installs"
		return c
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	pid, err := hp.HostPID(ctx)
	if err != nil {
		c.reason = err.Error()
		return c
	}
	n, known, err := sc.SeccompFilters(ctx)
	switch {
	case err != nil:
		c.reason = err.Error()
		return c
	case !known:
		c.reason = "its runtime keeps processes of its own with filters of their own on the host"
		return c
	}
	c.expected = n
	tasks, err := boxTasks("/proc", pid)
	if err != nil {
		c.reason = err.Error()
		return c
	}
	c.tasks = len(tasks)
	var w watchingChecker
	if watched {
		if tw := e.trace.watchOf(s); tw != nil {
			w = tw
		}
	}
	for _, t := range tasks {
		name := fmt.Sprintf("pid %d (%s) thread %d", t.PID, strconv.Quote(t.Comm), t.TID)
		if t.Mode == 1 || t.Filters > n {
			c.over = append(c.over, fmt.Sprintf("%s: Seccomp %d, %d filter(s)", name, t.Mode, t.Filters))
		}
		if w == nil {
			continue
		}
		if watched, err := w.Watching(t.PID, t.TID); err == nil && !watched {
			c.unwatched = append(c.unwatched, name)
		} else if err != nil && !errors.Is(err, unix.ESRCH) {
			c.unwatched = append(c.unwatched, name+": "+err.Error())
		}
	}
	c.over, c.unwatched = capList(c.over, 8), capList(c.unwatched, 8)
	c.ran = true
	return c
}

// watchingChecker is the tracer's answer to whether it attributes a
// thread (tracer.Watch).
type watchingChecker interface {
	Watching(pid, tid int) (bool, error)
}

// capList keeps the first n entries of l and says how many more there were.
func capList(l []string, n int) []string {
	if len(l) <= n {
		return l
	}
	return append(l[:n:n], fmt.Sprintf("and %d more", len(l)-n))
}

// boxTasks lists every thread of the box whose first process is init (a
// host pid): init's descendants, and when the box has a pid namespace of
// its own, every process in it (an exec'd one is not init's descendant)
// and theirs. Nested namespaces are their creators' descendants. Every read
// is bounded, and no path is followed through a link the box could make:
// /proc's own entries only.
func boxTasks(proc string, init int) ([]seccompTask, error) {
	roots := []int{init}
	boxNS, err := os.Readlink(filepath.Join(proc, strconv.Itoa(init), "ns", "pid"))
	if err != nil {
		return nil, fmt.Errorf("reading the box's pid namespace: %w", err)
	}
	if own, err := os.Readlink(filepath.Join(proc, "self", "ns", "pid")); err != nil || own != boxNS {
		ents, err := os.ReadDir(proc)
		if err != nil {
			return nil, fmt.Errorf("listing processes: %w", err)
		}
		for _, e := range ents {
			pid, err := strconv.Atoi(e.Name())
			if err != nil || pid == init {
				continue
			}
			if ns, err := os.Readlink(filepath.Join(proc, e.Name(), "ns", "pid")); err == nil && ns == boxNS {
				roots = append(roots, pid)
			}
		}
	}
	seen := map[int]bool{}
	var pids []int
	add := func(p int) {
		if !seen[p] {
			seen[p] = true
			pids = append(pids, p)
		}
	}
	for _, r := range roots {
		add(r)
	}
	var out []seccompTask
	for i := 0; i < len(pids); i++ {
		pid := pids[i]
		tids, err := os.ReadDir(filepath.Join(proc, strconv.Itoa(pid), "task"))
		if err != nil {
			continue // exited
		}
		for _, te := range tids {
			tid, err := strconv.Atoi(te.Name())
			if err != nil {
				continue
			}
			if len(out) >= maxSeccompTasks {
				return nil, fmt.Errorf("the box has more than %d threads: not all were read", maxSeccompTasks)
			}
			dir := filepath.Join(proc, strconv.Itoa(pid), "task", te.Name())
			b, err := bounded.ReadRegular(filepath.Join(dir, "status"), statusBytes)
			if err != nil {
				continue // exited
			}
			t, err := parseSeccompStatus(b)
			if err != nil {
				return nil, fmt.Errorf("reading thread %d of process %d: %w", tid, pid, err)
			}
			t.PID, t.TID = pid, tid
			out = append(out, t)
			kids, _ := bounded.ReadRegular(filepath.Join(dir, "children"), 64<<10)
			for _, f := range strings.Fields(string(kids)) {
				if c, err := strconv.Atoi(f); err == nil && c > 0 {
					add(c)
				}
			}
		}
	}
	return out, nil
}

// parseSeccompStatus reads Name, Seccomp and Seccomp_filters from a
// /proc status file. A status without Seccomp is an error (the check
// could not be made); one without Seccomp_filters (kernels before 5.9)
// counts a filtering thread as one filter, which tells a box's own filter
// from none but not from the runtime's.
func parseSeccompStatus(b []byte) (seccompTask, error) {
	var t seccompTask
	mode, filters := -1, -1
	for _, line := range strings.Split(string(b), "\n") {
		k, v, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		v = strings.TrimSpace(v)
		switch k {
		case "Name":
			t.Comm = v
		case "Seccomp":
			n, err := strconv.Atoi(v)
			if err != nil || n < 0 || n > 2 {
				return t, fmt.Errorf("status has Seccomp %q", v)
			}
			mode = n
		case "Seccomp_filters":
			n, err := strconv.Atoi(v)
			if err != nil || n < 0 {
				return t, fmt.Errorf("status has Seccomp_filters %q", v)
			}
			filters = n
		}
	}
	if mode < 0 {
		return t, errors.New("status has no Seccomp field")
	}
	t.Mode = mode
	switch {
	case filters >= 0:
		t.Filters = filters
	case mode == 2:
		t.Filters = 1
	}
	return t, nil
}

// seccompEvidence is what the host's reading of the box's seccomp state
// says about one probe's result. More filters than the runtime's is
// tampering: the box's own refusals pass for the sandbox's, so it shows
// escaped for the probes whose blocked could rest on a refusal (the
// hardened-runtime criterion's and the traced ones); the other probes
// carry it as a note.
func seccompEvidence(spec probes.Spec, c *seccompCheck) []evidence.Item {
	if c == nil {
		return nil
	}
	refusal := spec.Criterion == "hardened-runtime" || tracedProbe(spec)
	data := map[string]string{"when": c.when, "expected_filters": strconv.Itoa(c.expected), "threads": strconv.Itoa(c.tasks)}
	switch {
	case c.ran && len(c.over) > 0:
		it := evidence.Item{Source: evidence.SourceKernel, Kind: "kernel-seccomp-tampered", Data: data,
			Summary: "tampering: " + c.why() + ": the box installed a seccomp filter of its own, so refusals after it are the box's, not the sandbox's"}
		if refusal {
			it.Indicates = probes.Escaped
		}
		return []evidence.Item{it}
	case !refusal:
		return nil
	case c.ran && len(c.unwatched) > 0:
		return []evidence.Item{{Source: evidence.SourceKernel, Kind: "kernel-seccomp-unwatched", Data: data, Summary: c.why()}}
	case c.ran:
		return []evidence.Item{{Source: evidence.SourceKernel, Kind: "kernel-seccomp", Data: data,
			Summary: fmt.Sprintf("at %s the kernel shows each of the box's %d thread(s) with at most the runtime's %d seccomp filter(s)", c.when, c.tasks, c.expected)}}
	default:
		return []evidence.Item{{Source: evidence.SourceKernel, Kind: "kernel-seccomp-unchecked", Data: data, Summary: c.why()}}
	}
}
