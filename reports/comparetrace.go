package reports

import (
	"fmt"
	"strings"

	"github.com/sandcheck/sandcheck/evidence"
)

// TraceWatch is which of a run's sandboxes the tracer watched: the matrix
// says "watched, N syscalls" or "not watched: why", never a count for a
// sandbox no one watched.
type TraceWatch struct {
	// Watched and Unwatched count the record's traced sandboxes of each
	// kind.
	Watched, Unwatched int
	// Why is the first unwatched sandbox's reason, or (a record from
	// before sandboxes said, with none recorded) the tracer's own.
	Why string
}

// traceWatch reads a record's tracer section.
func traceWatch(t *evidence.Tracer) TraceWatch {
	var w TraceWatch
	for _, s := range t.Sandboxes {
		if s.Unwatched == "" {
			w.Watched++
			continue
		}
		if w.Unwatched++; w.Why == "" {
			w.Why = s.Unwatched
		}
	}
	if w.Watched+w.Unwatched == 0 {
		w.Why = t.Reason
		if w.Why == "" {
			w.Why = "no sandbox of the run was watched"
		}
	}
	return w
}

// surfaceText is the host kernel surface cell; quote renders the record's
// own words (a reason) for the format.
func surfaceText(col CompareColumn, quote func(string) string) string {
	if col.Remote {
		// The harness's tracer watches its own host's processes; what it
		// records for a platform's sandboxes is not their kernel surface.
		return "not traced (remote platform)"
	}
	if col.Surface < 0 {
		if col.SurfaceStatus == "" {
			return "not watched: no tracer"
		}
		return "not watched: tracer " + col.SurfaceStatus
	}
	w := col.Watch
	why := quote(shortReason(w.Why))
	switch {
	case w.Watched == 0:
		return "not watched: " + why
	case w.Unwatched > 0:
		return fmt.Sprintf("watched %d of %d sandboxes, %d syscalls; not watched: %s", w.Watched, w.Watched+w.Unwatched, col.Surface, why)
	}
	s := fmt.Sprintf("watched, %d syscalls", col.Surface)
	if col.SurfaceStatus == "partial" {
		s += " (partial)"
	}
	return s
}

// surfaceHTML is surfaceText for the HTML page (the template escapes).
func surfaceHTML(col CompareColumn) string {
	return surfaceText(col, func(s string) string { return s })
}

// shortReason keeps a reason to a matrix cell's length.
func shortReason(s string) string {
	s = strings.Join(strings.Fields(plain(s)), " ")
	if r := []rune(s); len(r) > 120 {
		s = string(r[:120]) + "…"
	}
	return s
}
