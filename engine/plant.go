package engine

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/sandcheck/sandcheck/runners"
)

// Absence is not evidence: that the host found nothing of a teardown
// probe's token after close says the sandbox's teardown worked only if
// something had been planted to survive it. The box controls the probe, so
// a probe that never tried (and reports "blocked") leaves nothing either.
// The host therefore needs a marker of its own before it may read
// "nothing left" as blocked: its own view of the sandbox shows there was
// no way to plant anything outside the box (no engine socket, no writable
// host folder, none of the privileges that reach the host). plantAvenues
// works that out from the runtime's view and the target's own
// configuration.

// Preconditions a teardown item records in its data ("precondition"):
// what lets the host read an absence as blocked. The policy counts an
// absence only with preconditionNoAvenue. (A host that saw the plant before
// teardown would be the other marker; no runner reports one yet, so a box
// that could plant reads unconfirmed whatever its teardown did.)
const (
	// preconditionNoAvenue: the host's view shows the box had no way to
	// plant this kind of thing outside itself.
	preconditionNoAvenue = "no-avenue"
	// preconditionNone: the box could have planted and the host saw no
	// plant; the absence proves nothing.
	preconditionNone = "none"
)

// maxSocketScan bounds the entries of one bound host folder looked through
// for a socket.
const maxSocketScan = 256

// hostReachCaps are the added capabilities with which a box reaches the
// host's files, processes or mounts (and so an engine socket or a host
// folder) without anything bound in.
var hostReachCaps = []string{"ALL", "SYS_ADMIN", "SYS_PTRACE", "DAC_READ_SEARCH", "SYS_MODULE", "SYS_RAWIO", "BPF"}

// plantAvenues lists, for each teardown kind, the ways the runtime's view v
// (and the target's PID namespace, pidHost) shows a box could have planted
// something of that kind outside itself; an empty list means the host sees
// none. A view that cannot tell its mounts or capabilities is an avenue
// itself: the host cannot rule one out.
func plantAvenues(v *runners.RuntimeView, pidHost bool, kinds []string) map[string][]string {
	out := make(map[string][]string, len(kinds))
	if v == nil {
		for _, k := range kinds {
			out[k] = []string{"the host has no runtime view of the sandbox"}
		}
		return out
	}
	var reach []string // what reaches the host beyond any bind
	if v.Privileged {
		reach = append(reach, "privileged")
	}
	for _, c := range v.CapAdd {
		if slices.Contains(hostReachCaps, strings.TrimPrefix(strings.ToUpper(c), "CAP_")) {
			reach = append(reach, "cap_add "+c)
		}
	}
	if pidHost {
		reach = append(reach, "the host's PID namespace (/proc/1/root)")
	}
	for _, f := range []string{"mounts", "cap_add", "privileged"} {
		if slices.Contains(v.Unknown, f) {
			reach = append(reach, "the runtime could not tell its "+f)
		}
	}
	engine := append(slices.Clone(reach), engineRoutes(v.Mounts)...)
	storage := append(slices.Clone(reach), writableHostFolders(v.Mounts)...)
	for _, k := range kinds {
		switch k {
		case "scratch":
			out[k] = storage
		default:
			// Processes, cgroups, containers, mounts and networks outlive
			// the box only when made outside it: through a container
			// engine, or from the host's side with the host's privileges.
			out[k] = engine
		}
	}
	return out
}

// engineRoutes lists the binds through which a box could reach a container
// engine: a socket bound in, a read-only folder holding a socket, or a
// writable host folder (the box can have removed a socket from it before
// the host looks).
func engineRoutes(ms []runners.Mount) []string {
	var out []string
	for _, m := range ms {
		if m.Destination == runners.ProbeMount || (m.Type != "bind" && m.Type != "volume") {
			continue
		}
		fi, err := os.Lstat(m.Source)
		switch {
		case err != nil:
			out = append(out, fmt.Sprintf("bind %s->%s (the host cannot look at its source: %v)", m.Source, m.Destination, err))
		case fi.Mode()&os.ModeSocket != 0:
			out = append(out, fmt.Sprintf("socket %s bound at %s", m.Source, m.Destination))
		case !fi.IsDir():
		case !m.ReadOnly:
			out = append(out, fmt.Sprintf("writable host folder %s bound at %s (could hold a socket)", m.Source, m.Destination))
		default:
			if s := socketIn(m.Source); s != "" {
				out = append(out, fmt.Sprintf("socket %s in the folder bound at %s", s, m.Destination))
			}
		}
	}
	return out
}

// socketIn returns a socket among the first entries of dir (not following
// links), or "".
func socketIn(dir string) string {
	f, err := os.Open(dir)
	if err != nil {
		return ""
	}
	defer f.Close()
	ents, _ := f.ReadDir(maxSocketScan)
	for _, e := range ents {
		if e.Type()&os.ModeSocket != 0 {
			return filepath.Join(dir, e.Name())
		}
	}
	return ""
}

// writableHostFolders lists the writable binds and volumes of folders
// (host storage that outlives the box, where a file can be added) other
// than the probe's own folder; one whose source the host cannot look at
// counts too.
func writableHostFolders(ms []runners.Mount) []string {
	var out []string
	for _, m := range ms {
		if m.Destination == runners.ProbeMount || m.ReadOnly || (m.Type != "bind" && m.Type != "volume") {
			continue
		}
		if fi, err := os.Lstat(m.Source); err == nil && !fi.IsDir() {
			continue
		}
		out = append(out, fmt.Sprintf("writable host folder %s (%s) at %s", m.Source, m.Type, m.Destination))
	}
	return out
}
