package impl

import (
	"context"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/sandcheck/sandcheck/probes"
)

func TestFdExhaustionClosesWhatItOpened(t *testing.T) {
	var lim unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &lim); err != nil {
		t.Fatal(err)
	}
	before := countFDs(t)
	r := fdExhaustion(context.Background(), probesParams())
	if r.Outcome != probes.Escaped && r.Outcome != probes.Blocked {
		t.Fatalf("outcome %s: %s %v", r.Outcome, r.Detail, r.Evidence)
	}
	if r.Outcome == probes.Blocked && r.Evidence["errno"] != "EMFILE(24)" {
		t.Errorf("blocked without EMFILE: %v", r.Evidence)
	}
	if after := countFDs(t); after > before+2 {
		t.Errorf("descriptors: %d before, %d after", before, after)
	}
	var now unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &now); err != nil || now != lim {
		t.Errorf("RLIMIT_NOFILE %+v afterwards, want it restored to %+v", now, lim)
	}
}
