package main

// The reaper: what removes a run's sandboxes, harness network, firewall
// rules and run folder when the run's process dies without tearing them
// down (SIGKILL, the OOM killer, a crash). Without it they stayed until the
// next run's sweep, the weak reference's sandboxes running as root with
// the engine socket for up to their 2 h deadline.
//
// At its start a run starts `sandcheck cleanup reap`, its own binary, in a
// session of its own (a kill of the run's process group does not take it)
// and moved to the top cgroup of every hierarchy (a kill of the run's
// cgroup, as systemd or a CI runner does, does not take it either:
// reaper_cgroup.go), and keeps the only write end of a pipe whose read end the reaper holds.
// A run that ends on its own writes "done" and closes it: the reaper exits.
// When the run dies, the kernel closes the write end: the reaper reads EOF
// without "done", waits until the run's process is gone, and sweeps that
// run's things with the code `sandcheck cleanup` and every run's preflight
// use (docker.Sweep), confined to the run's owner string.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/sys/unix"

	"github.com/sandcheck/sandcheck/internal/owner"
	"github.com/sandcheck/sandcheck/runners"
	"github.com/sandcheck/sandcheck/runners/docker"
)

const (
	// reaperFD is the descriptor the reaper reads its run's pipe on
	// (the first of exec.Cmd's ExtraFiles).
	reaperFD = 3
	// reaperDone is what a run that ends on its own writes to its reaper.
	reaperDone = "done"
	// reaperMaxLife bounds a reaper whatever the run's --timeout (a run
	// that outlives it keeps its sandboxes: their holders follow the run's
	// lease, docker.DefaultLease, and every later run's sweep removes what
	// a run that died after it left).
	reaperMaxLife = time.Hour
	// reaperGrace is how much longer than the run's --timeout a reaper
	// lives: the run's teardown after its timeout.
	reaperGrace = 5 * time.Minute
	// reaperLog, in the run's --out folder, says what a reaper removed.
	reaperLog = "reaper.log"
)

// Bounds on a reaper's sweeps after its run died: it sweeps again every
// reapEvery until a sweep at least reapSettle after the first removes
// nothing (an engine request in flight when the run died, such as a
// sandbox's create, lands after the first sweep), and stops at reapBound.
const (
	reapEvery  = 2 * time.Second
	reapSettle = 8 * time.Second
	reapBound  = 40 * time.Second
)

// reaper is a run's handle on its reaper process.
type reaper struct {
	w   *os.File
	cmd *exec.Cmd
	// cgroups are the cgroups the reaper was moved out of; cgroupErr says
	// which it could not leave (a kill of one of those takes it too).
	cgroups   []string
	cgroupErr error
}

// reaperLife is how long the reaper of a run bounded by timeout lives.
func reaperLife(timeout time.Duration) time.Duration {
	return min(timeout+reaperGrace, reaperMaxLife)
}

// startReaper starts the reaper of this process's run, which writes what it
// removed to outDir's reaper.log. The reaper is the binary this process
// runs (/proc/self/exe, the same file even if it was replaced on disk).
func startReaper(outDir string, timeout time.Duration) (*reaper, error) {
	out, err := filepath.Abs(outDir)
	if err != nil {
		return nil, fmt.Errorf("starting the reaper: %w", err)
	}
	// os.Pipe sets close-on-exec on both ends: no process the run starts
	// (a runtime, iptables, the canary process) inherits the write end,
	// so the reaper sees EOF exactly when this process is gone.
	r, w, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("starting the reaper: %w", err)
	}
	defer r.Close()
	cmd := &exec.Cmd{
		Path: "/proc/self/exe",
		Args: []string{"sandcheck", "cleanup", "reap", "--owner", docker.SelfOwner(),
			"--out", out, "--max", reaperLife(timeout).String()},
		Dir:        "/",
		ExtraFiles: []*os.File{r},
		// Its own session and process group: neither Ctrl-C's SIGINT nor
		// a kill of the run's process group reaches it. Its standard
		// streams are /dev/null, so it never holds the run's output open.
		SysProcAttr: &syscall.SysProcAttr{Setsid: true},
	}
	if err := cmd.Start(); err != nil {
		w.Close()
		return nil, fmt.Errorf("starting the reaper: %w", err)
	}
	// Before this run makes anything: out of the cgroups it shares with
	// the run, which a cgroup kill of the run ends with it.
	left, cerr := leaveCgroups(cmd.Process.Pid)
	return &reaper{w: w, cmd: cmd, cgroups: left, cgroupErr: cerr}, nil
}

// end tells the reaper the run ended on its own and removed what it made,
// and waits (bounded) for it to exit; safe on nil and twice.
func (rp *reaper) end() {
	if rp == nil || rp.w == nil {
		return
	}
	_, _ = rp.w.WriteString(reaperDone + "\n")
	_ = rp.w.Close()
	rp.w = nil
	done := make(chan struct{})
	go func() {
		_ = rp.cmd.Wait()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(2 * time.Second):
		// It lives on, bounded by --max; the run need not wait.
	}
}

// reapCmd is the hidden `sandcheck cleanup reap`, which only a run starts.
func reapCmd() *cobra.Command {
	var (
		who, out string
		maxLife  time.Duration
	)
	c := &cobra.Command{
		Use:    "reap --owner OWNER --out DIR --max DURATION",
		Short:  "Remove one run's things once its process dies (started by sandcheck run)",
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if who == "" || maxLife <= 0 {
				return harness(errors.New("cleanup reap: --owner and --max are required"))
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), min(maxLife, reaperMaxLife))
			defer cancel()
			// Only a pipe from the run: started by hand, without one, it
			// would take a closed descriptor for the run's death.
			var st unix.Stat_t
			if err := unix.Fstat(reaperFD, &st); err != nil || st.Mode&unix.S_IFMT != unix.S_IFIFO {
				return harness(fmt.Errorf("cleanup reap: descriptor %d is not the run's pipe", reaperFD))
			}
			if !runDied(ctx, os.NewFile(reaperFD, "run pipe"), who) {
				return nil
			}
			// The sweep has time of its own, even at the end of --max.
			return reap(context.WithoutCancel(ctx), who, out)
		},
	}
	c.Flags().StringVar(&who, "owner", "", "the run's owner string (boot id/pid/start time)")
	c.Flags().StringVar(&out, "out", "", "the run's output folder, where reaper.log goes")
	c.Flags().DurationVar(&maxLife, "max", 0, "how long to watch the run at most")
	return c
}

// runDied waits for the run's pipe to close and reports whether the run
// died without saying it was done, once its process is gone; false also
// when ctx (the reaper's lifetime) ends first.
func runDied(ctx context.Context, pipe *os.File, who string) bool {
	got := make(chan []byte, 1)
	go func() {
		// Read to EOF, keeping a few bytes: only the run writes here.
		var b bytes.Buffer
		_, _ = io.Copy(&b, io.LimitReader(pipe, 64))
		_, _ = io.Copy(io.Discard, pipe)
		got <- b.Bytes()
	}()
	select {
	case <-ctx.Done():
		return false
	case b := <-got:
		if strings.TrimSpace(string(b)) == reaperDone {
			return false
		}
	}
	// The kernel closes a dying process's files before it is gone: wait
	// until it is, so no sweep sees it alive and keeps its things.
	for {
		if alive, _ := owner.Alive(who); !alive {
			return true
		}
		select {
		case <-ctx.Done():
			return false
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// reap sweeps the dead run's things (see reapEvery) and writes what it
// removed, and what it could not, to the run's reaper.log.
func reap(ctx context.Context, who, out string) error {
	ctx, cancel := context.WithTimeout(ctx, reapBound)
	defer cancel()
	var removed, kept []string
	var errs []error
	runs := map[string]bool{}
	first := time.Now()
	for {
		r, k, err := docker.Sweep(ctx, docker.SweepOptions{Owner: who, Runs: runs})
		rr, rk, rerr := runners.Sweep(ctx, who)
		r, k, err = append(r, rr...), append(k, rk...), errors.Join(err, rerr)
		removed, kept = append(removed, r...), k
		if err != nil {
			errs = append(errs, err)
		}
		if (len(r) == 0 && time.Since(first) >= reapSettle) || ctx.Err() != nil {
			break
		}
		select {
		case <-ctx.Done():
		case <-time.After(reapEvery):
		}
	}
	err := errors.Join(errs...)
	if out != "" && (len(removed) > 0 || err != nil) {
		writeReaperLog(filepath.Join(out, reaperLog), who, removed, kept, err, time.Since(first))
	}
	if err != nil {
		return harness(fmt.Errorf("cleanup reap: %w", err))
	}
	return nil
}

// writeReaperLog appends a reaper's account to path. Nobody reads the
// reaper's own output, so the run's folder is where it can be found.
func writeReaperLog(path, who string, removed, kept []string, err error, took time.Duration) {
	if os.MkdirAll(filepath.Dir(path), 0o755) != nil {
		return
	}
	f, ferr := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if ferr != nil {
		return
	}
	defer f.Close()
	log := slog.New(slog.NewTextHandler(f, nil))
	log.Warn("the run's process died without removing what it made: the reaper removed it",
		"owner", who, "removed", len(removed), "took", took.Round(time.Millisecond))
	for _, r := range removed {
		log.Info("removed", "what", r)
	}
	for _, k := range kept {
		log.Info("kept", "what", k)
	}
	if err != nil {
		log.Error("could not remove everything", "err", err)
	}
}
