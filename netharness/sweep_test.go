package netharness

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sandcheck/sandcheck/canary"
)

// TestSweepRemovesDeadRun leaves a network as a crashed run would (canary
// gone, lock dropped, everything else in place) and checks Sweep removes it.
func TestSweepRemovesDeadRun(t *testing.T) {
	docker := needHost(t)
	n := createForTest(t, docker, nil)
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	// Die: the process's listeners and flock go with it; nothing else does.
	if err := n.stopCanaries(ctx); err != nil {
		t.Fatal(err)
	}
	if err := n.lock.release(); err != nil {
		t.Fatal(err)
	}

	removed, err := Sweep(ctx, docker)
	if err != nil {
		t.Fatalf("Sweep: %v", err)
	}
	if !slices.Contains(removed, "docker network "+n.Name()) {
		t.Errorf("Sweep removed %q, want the network %s among them", removed, n.Name())
	}
	rules := slices.DeleteFunc(slices.Clone(removed), func(s string) bool { return !strings.Contains(s, n.Bridge()) })
	if len(rules) != len(n.rules)+len(n.rules6) {
		t.Errorf("Sweep removed rules %q, want the %d rules naming %s", rules, len(n.rules)+len(n.rules6), n.Bridge())
	}
	checkGone(t, docker, n)
}

// TestLockExcludesSecondRun checks that while one harness network lives, a
// second Create and a Sweep wait for the lock, give up with their context
// and touch nothing.
func TestLockExcludesSecondRun(t *testing.T) {
	docker := needHost(t)
	n := createForTest(t, docker, nil)

	ctx, cancel := context.WithTimeout(t.Context(), 500*time.Millisecond)
	defer cancel()
	if second, err := Create(ctx, Options{RunID: "second", Docker: docker}); err == nil {
		second.Close(t.Context())
		t.Fatal("a second Create succeeded while the first network lives")
	} else if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("second Create failed with %v, want a lock wait ended by the deadline", err)
	}

	ctx, cancel = context.WithTimeout(t.Context(), 500*time.Millisecond)
	defer cancel()
	if removed, err := Sweep(ctx, docker); !errors.Is(err, context.DeadlineExceeded) || len(removed) > 0 {
		t.Errorf("Sweep during a live run removed %q with error %v; want nothing removed and a deadline error", removed, err)
	}
	// The docker network, the bridge, every rule, every address and every
	// socket of the canaries.
	want := 2 + len(n.rules) + len(hostAddrs())
	if n.IPv6() {
		want += len(n.rules6) + len(hostAddrs6()) // the IPv6 fence and addresses
	}
	if n.neighbourLink != "" {
		want++ // the neighbour's veth end on the bridge
	}
	for _, c := range n.canaries {
		switch c.(type) {
		case *canary.DNSServer:
			want += 2 // UDP and TCP
		default:
			want++
		}
	}
	left, err := n.Leftovers(t.Context())
	if err != nil || len(left) != want {
		t.Errorf("live network's parts = %q (err %v), want all %d still there", left, err, want)
	}
}
