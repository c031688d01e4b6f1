package impl

import (
	"bytes"
	"compress/gzip"
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sandcheck/sandcheck/probes"
)

func TestBombStreamIsSmallAndExpandsToTheBound(t *testing.T) {
	s, err := bombStream()
	if err != nil {
		t.Fatal(err)
	}
	if len(s) > 1<<20 {
		t.Errorf("the compressed stream is %d bytes; a bomb is small", len(s))
	}
	zr, err := gzip.NewReader(bytes.NewReader(s))
	if err != nil {
		t.Fatal(err)
	}
	n, err := io.Copy(io.Discard, zr)
	if err != nil || n != bombOutMiB<<20 {
		t.Errorf("expanded to %d bytes (%v), want %d", n, err, bombOutMiB<<20)
	}
}

func TestWriteBoundedStopsAtTheBoundAndRemoves(t *testing.T) {
	path := filepath.Join(t.TempDir(), "f")
	calls := 0
	mib, errno, err := writeBounded(context.Background(), path, 3, func(int) ([]byte, error) {
		calls++
		return make([]byte, diskChunk), nil
	})
	if err != nil || errno != 0 || mib != 3 || calls != 3 {
		t.Errorf("writeBounded = %d MiB, %v, %v after %d chunks; want 3 MiB", mib, errno, err, calls)
	}
	if _, err := os.Lstat(path); !os.IsNotExist(err) {
		t.Errorf("the fill file was left behind: %v", err)
	}
	if err := os.WriteFile(path, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, errno, _ := writeBounded(context.Background(), path, 1, nil); errno != unix.EEXIST {
		t.Errorf("an existing file was written over (errno %v)", errno)
	}
}

func TestMakeInodesRemovesEverything(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "inodes")
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	n, _, err := makeInodes(ctx, dir)
	if err == nil || n != 0 {
		t.Errorf("a cancelled context made %d files (err %v)", n, err)
	}
	if _, err := os.Lstat(dir); !os.IsNotExist(err) {
		t.Errorf("the folder was left behind: %v", err)
	}
}

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

func countFDs(t *testing.T) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	return len(ents)
}

func TestHasArgs(t *testing.T) {
	argv := []string{"sandcheck-probe", "child", "linger", "plain", "m1", "90"}
	if !hasArgs(argv, []string{"child", "linger", "plain", "m1"}) {
		t.Error("a matching command line was missed")
	}
	for _, want := range [][]string{{"child", "linger", "plain", "m2"}, {"linger", "child"}, append(argv, "x")} {
		if hasArgs(argv, want) {
			t.Errorf("%v matched %v", want, argv)
		}
	}
}

// TestLingerPlantThenCheck plants each kind of lingering process from this
// test binary (standing in for the probe binary) and finds and kills it as
// the next task would.
func TestLingerPlantThenCheck(t *testing.T) {
	for kind := range lingerKinds {
		t.Run(kind, func(t *testing.T) {
			p := probes.Params{Marker: "t" + kind + strings.Repeat("0", 4), Phase: "plant"}
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			r := lingerProbe(kind)(ctx, p)
			if r.Outcome != probes.NotApplicable || !strings.HasPrefix(r.Evidence["planted"], "up ") {
				t.Fatalf("plant: %s %s %v", r.Outcome, r.Detail, r.Evidence)
			}
			p.Phase = "check"
			r = lingerProbe(kind)(ctx, p)
			if r.Outcome != probes.Escaped {
				t.Fatalf("check: %s %s %v", r.Outcome, r.Detail, r.Evidence)
			}
			// The check killed it: a second look finds nothing (give the
			// kernel a moment to reap; an orphan's parent here is init or
			// a subreaper, and a zombie of ours still shows its cmdline).
			reapChildren()
			deadline := time.Now().Add(5 * time.Second)
			for {
				r = lingerProbe(kind)(ctx, p)
				if r.Outcome == probes.Blocked || time.Now().After(deadline) {
					break
				}
				time.Sleep(50 * time.Millisecond)
				reapChildren()
			}
			if r.Outcome != probes.Blocked {
				t.Errorf("after the kill: %s %s %v", r.Outcome, r.Detail, r.Evidence)
			}
		})
	}
}

// reapChildren waits for any exited child of the test process (the plain
// and noterm kinds are its own children here).
func reapChildren() {
	for {
		var ws syscall.WaitStatus
		pid, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil)
		if pid <= 0 || err != nil {
			return
		}
	}
}

func TestChildLingerRefusesBadArguments(t *testing.T) {
	for _, args := range [][]string{nil, {"plain", "m"}, {"nosuch", "m", "5"}, {"plain", "m", "0"}, {"plain", "m", "100000"}} {
		if code := childLinger(args); code != 2 {
			t.Errorf("childLinger(%q) = %d, want 2", args, code)
		}
	}
}

func TestScratchNotEmptyNeedsAMarkerAndAPhase(t *testing.T) {
	if r := scratchNotEmpty(context.Background(), probes.Params{Phase: "check"}); r.Outcome != probes.Inconclusive {
		t.Errorf("no marker: %s", r.Outcome)
	}
	if r := crontabProbe(context.Background(), probes.Params{Marker: "m", Phase: "later"}); r.Outcome != probes.Inconclusive {
		t.Errorf("bad phase: %s", r.Outcome)
	}
}

func TestPlantCrontabNeverOverwrites(t *testing.T) {
	path := filepath.Join(t.TempDir(), "cron.d", "entry")
	if got := plantCrontab(path, "# x\n"); got != "written" {
		t.Fatalf("first plant: %s", got)
	}
	if got := plantCrontab(path, "# y\n"); !strings.Contains(got, "EEXIST") {
		t.Errorf("second plant: %s, want EEXIST", got)
	}
	if b, err := readBounded(path, 64); err != nil || string(b) != "# x\n" {
		t.Errorf("entry now %q (%v)", b, err)
	}
	link := filepath.Join(filepath.Dir(path), "link")
	if err := os.Symlink(path, link); err != nil {
		t.Fatal(err)
	}
	if _, err := readBounded(link, 64); err == nil {
		t.Error("readBounded followed a symlink")
	}
}
