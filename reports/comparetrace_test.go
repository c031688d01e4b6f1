package reports

import (
	"testing"

	"github.com/sandcheck/sandcheck/evidence"
)

// The matrix says per run whether its sandboxes were watched: a count only
// for watched ones, and a sandbox no one watched reads "not watched" with
// the record's reason, never "0 syscalls".
func TestSurfaceSaysWhoWasWatched(t *testing.T) {
	watched := evidence.TracedSandbox{ID: "a", Scope: "process-tree"}
	for _, c := range []struct {
		name   string
		tracer *evidence.Tracer
		remote bool
		want   string
	}{
		{"all watched", &evidence.Tracer{Status: "on", HostSyscalls: []string{"read", "write"},
			Sandboxes: []evidence.TracedSandbox{watched, watched}}, false, "watched, 2 syscalls"},
		{"watched, lost events", &evidence.Tracer{Status: "partial", HostSyscalls: []string{"read"},
			Sandboxes: []evidence.TracedSandbox{watched}}, false, "watched, 1 syscalls (partial)"},
		{"none watched", &evidence.Tracer{Status: "partial", HostSyscalls: []string{},
			Sandboxes: []evidence.TracedSandbox{{ID: "b", Unwatched: "its runner names no host process of it"}}}, false,
			"not watched: ` its runner names no host process of it `"},
		{"some watched", &evidence.Tracer{Status: "partial", HostSyscalls: []string{"read"},
			Sandboxes: []evidence.TracedSandbox{watched, {ID: "b", Unwatched: "a|b"}}}, false,
			"watched 1 of 2 sandboxes, 1 syscalls; not watched: ` a¦b `"},
		// A wrapper run's record from before sandboxes said: status
		// partial, no sandbox, 0 syscalls.
		{"old record, nothing watched", &evidence.Tracer{Status: "partial", Reason: "sandbox wr-1 unwatched: no pid", HostSyscalls: []string{}}, false,
			"not watched: ` sandbox wr-1 unwatched: no pid `"},
		{"tracer off", &evidence.Tracer{Status: "off"}, false, "not watched: tracer off"},
		{"no tracer section", nil, false, "not watched: no tracer"},
		{"remote", &evidence.Tracer{Status: "partial"}, true, "not traced (remote platform)"},
	} {
		t.Run(c.name, func(t *testing.T) {
			col := CompareColumn{Surface: -1, Remote: c.remote}
			if tr := c.tracer; tr != nil {
				col.SurfaceStatus = tr.Status
				if tr.Status == "on" || tr.Status == "partial" {
					col.Surface = len(tr.HostSyscalls)
				}
				col.Watch = traceWatch(tr)
			}
			if got := surfaceText(col, cell); got != c.want {
				t.Errorf("surface cell %q, want %q", got, c.want)
			}
		})
	}
}
