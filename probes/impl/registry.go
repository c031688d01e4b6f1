// Package impl carries out the probes of the catalog (probes/catalog/*.yaml)
// from inside a sandbox. A probe's ID tells its file: the probes of family F
// live in files named F.go or F_*.go, each of which registers its own probes
// from init (register); Run applies the spec's time bound and the result
// limits around each one.
//
// The package never prints: the probe binary (cmd/sandcheck-probe) owns stdout
// and stderr. Work that needs a process of its own (the bombs, the user
// namespace child) re-executes the binary as "child <kind>", see Child.
package impl

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"time"

	"github.com/sandcheck/sandcheck/probes"
)

// Func carries out one probe. It must honour ctx, leave nothing running and
// return a result whose Outcome and Evidence say what it saw; Run fills in the
// probe ID and makes the result fit the limits of probes.Result.
type Func func(ctx context.Context, p probes.Params) probes.Result

// registry holds one entry per catalog ID, and registeredIn the source file
// that registered it; registry_test.go checks that they cover the catalog
// exactly and that each probe is registered and implemented in a file of its
// family.
var (
	registry     = map[string]Func{}
	registeredIn = map[string]string{}
)

// register adds the probes of one file: every file that implements probes
// calls it once, from init, with the probes it implements, and only those of
// its family (the family is the ID's first segment and the file's name up to
// its first "_" or ".go": egress.udp lives in egress*.go). A duplicate ID is a
// build defect.
func register(m map[string]Func) {
	_, file, _, _ := runtime.Caller(1)
	for id, f := range m {
		if _, dup := registry[id]; dup {
			panic("probe " + id + " registered twice")
		}
		registry[id] = f
		registeredIn[id] = file
	}
}

// ErrUnknownProbe is returned by Run for an ID without an implementation.
var ErrUnknownProbe = errors.New("unknown probe")

// IDs returns the implemented probe IDs in catalog order.
func IDs() []string {
	var ids []string
	for _, s := range probes.Catalog() {
		if _, ok := registry[s.ID]; ok {
			ids = append(ids, s.ID)
		}
	}
	return ids
}

// Known reports whether id has both a catalog entry and an implementation.
func Known(id string) bool {
	_, impl := registry[id]
	_, spec := probes.Lookup(id)
	return impl && spec
}

// graceAfterDeadline is how long Run waits for a probe that overran its
// deadline before giving up on it; probes honour ctx, so this only matters for
// a probe stuck in a system call.
const graceAfterDeadline = 500 * time.Millisecond

// Run carries out one probe within its bound. The probe gets 80% of the spec's
// timeout (the spec's timeout bounds the whole run on the harness side, process
// start and output included). A probe that panics or overruns is reported as
// inconclusive; the returned error is only for an unknown ID.
func Run(ctx context.Context, id string, p probes.Params) (probes.Result, error) {
	f, ok := registry[id]
	spec, inCatalog := probes.Lookup(id)
	if !ok || !inCatalog {
		return probes.Result{}, fmt.Errorf("running probe %q: %w", id, ErrUnknownProbe)
	}
	budget := p.Bounds.Timeout(id, spec.Timeout.D()) * 8 / 10
	ctx, cancel := context.WithTimeout(ctx, budget)
	defer cancel()

	done := make(chan probes.Result, 1)
	go func() {
		defer func() {
			if v := recover(); v != nil {
				done <- inconclusive(fmt.Sprintf("probe panicked: %v", v), nil)
			}
		}()
		// An egress or metadata probe also tries its destination
		// through the wrapper's proxies, where the target declares any
		// (egress_proxypath.go).
		done <- withProxyPaths(ctx, id, p, f(ctx, p))
	}()
	var r probes.Result
	select {
	case r = <-done:
	case <-ctx.Done():
		select {
		case r = <-done:
		case <-time.After(graceAfterDeadline):
			r = inconclusive(fmt.Sprintf("probe did not finish within %s", budget), nil)
		}
	}
	r.Probe = id
	return finish(r), nil
}
