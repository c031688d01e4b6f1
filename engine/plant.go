package engine

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/sandcheck/sandcheck/probes"
	"github.com/sandcheck/sandcheck/runners"
)

// Absence is not evidence: that the host found nothing of a teardown
// probe's token after close says the sandbox's teardown worked only if
// something had been planted to survive it. The box controls the probe, so
// a probe that never tried (and reports "blocked") leaves nothing either.
// The host therefore needs a marker of its own before it may read
// "nothing left" as blocked: its own view of the sandbox shows there was
// no way to plant anything outside the box (no engine socket, no writable
// host folder, none of the privileges that reach the host), which
// plantAvenues works out from the runtime's view and the target's own
// configuration; or the host saw the plant itself outside the box before
// close (seePlant).

// Preconditions a teardown item records in its data ("precondition"):
// what lets the host read an absence as blocked. The policy counts an
// absence only with preconditionNoAvenue or preconditionSeen; a box that
// could plant and whose plant the host did not see reads unconfirmed
// whatever its teardown did.
const (
	// preconditionNoAvenue: the host's view shows the box had no way to
	// plant this kind of thing outside itself.
	preconditionNoAvenue = "no-avenue"
	// preconditionSeen: before close the host itself saw a thing of this
	// kind carrying the probe's token outside the box (plantViewer), so
	// nothing found after close means teardown removed it.
	preconditionSeen = "seen"
	// preconditionNone: the box could have planted and the host saw no
	// plant; the absence proves nothing.
	preconditionNone = "none"
)

// plantViewer is implemented by sandboxes whose host can look, before
// Close, for what code inside made outside the box carrying a token (the
// teardown probes' plants): the marker that lets a box with an avenue read
// blocked when its teardown really cleans up.
type plantViewer interface {
	// SeePlant lists, for each of the given kinds (runners.ResidueKinds),
	// what carrying token the host sees outside the sandbox now; it
	// removes nothing and is an error after Close.
	SeePlant(ctx context.Context, token string, kinds []string) (map[string][]string, error)
}

// plantSight is what the host saw of one probe's plant before close: what
// it found per kind, or why it could not look (nil: it did not try).
type plantSight struct {
	seen map[string][]string
	err  error
}

// plantViewTimeout bounds the engine's wait for one look before close.
const plantViewTimeout = 30 * time.Second

// seePlant asks the sandbox, before it is closed, what it sees outside the
// box of the plant of a teardown probe (its teardown:<kind> host kinds) by
// the probe's token; nil when the probe names none or the sandbox cannot
// look.
func (e *Engine) seePlant(ctx context.Context, spec probes.Spec, s *sandbox) *plantSight {
	kinds := teardownKinds(spec)
	pv, ok := s.sb.(plantViewer)
	if len(kinds) == 0 || !ok {
		return nil
	}
	e.mu.Lock()
	token := s.tokens[spec.ID]
	e.mu.Unlock()
	if token == "" {
		return &plantSight{err: errors.New("the probe's token is unknown")}
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), plantViewTimeout)
	defer cancel()
	seen, err := pv.SeePlant(ctx, token, kinds)
	return &plantSight{seen: seen, err: err}
}

// teardownKinds lists the kinds of a spec's teardown:<kind> host evidence.
func teardownKinds(spec probes.Spec) []string {
	var kinds []string
	for _, h := range spec.Host {
		if k, ok := strings.CutPrefix(h, "teardown:"); ok {
			kinds = append(kinds, k)
		}
	}
	return kinds
}

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
