package impl

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sandcheck/sandcheck/probes"
)

func init() {
	register(map[string]Func{
		"workload.transform-compute":    workloadCompute,
		"workload.transform-subprocess": workloadSubprocess,
		"workload.transform-threads":    workloadThreads,
		"workload.transform-scratch":    workloadScratch,
	})
}

// The workload probes do what a normal task does, to show the sandbox stays
// usable. Their outcome follows the policy's convention for workloads:
// escaped means the action went through (what a profile's must_succeed
// demands), blocked means the sandbox broke it. None of them tries anything
// hostile: they are the control that a sandbox is not "secure" merely by
// being unusable.

// computeFor is how long transform-compute hashes.
const computeFor = 100 * time.Millisecond

// workloadCompute hashes a buffer over and over for about 100 ms of CPU and
// checks the chain against a second computation, so a broken CPU quota or a
// kill shows as blocked.
func workloadCompute(ctx context.Context, _ probes.Params) probes.Result {
	e := ev{}
	start := time.Now()
	sum := sha256.Sum256([]byte("sandcheck workload"))
	rounds := 0
	for time.Since(start) < computeFor {
		if ctx.Err() != nil {
			e.setInt("rounds", rounds)
			return blocked("the box could not finish 100 ms of compute before the deadline", e)
		}
		for i := 0; i < 1000; i++ {
			sum = sha256.Sum256(sum[:])
		}
		rounds += 1000
	}
	elapsed := time.Since(start)
	// Recompute the same chain: the answer must be the same.
	check := sha256.Sum256([]byte("sandcheck workload"))
	for i := 0; i < rounds; i++ {
		check = sha256.Sum256(check[:])
	}
	e.setInt("rounds", rounds)
	e.set("elapsed", elapsed.Round(time.Millisecond).String())
	e.set("digest", hex.EncodeToString(sum[:8]))
	if check != sum {
		return blocked("the compute gave different answers twice", e)
	}
	return escaped(fmt.Sprintf("%d SHA-256 rounds in %s", rounds, elapsed.Round(time.Millisecond)), e)
}

// workloadSubprocess starts the probe binary itself as a child (the noop
// helper), waits for it and checks its exit status: fork, exec and wait.
func workloadSubprocess(ctx context.Context, _ probes.Params) probes.Result {
	e := ev{}
	cmd := exec.CommandContext(ctx, selfExe, "child", "noop")
	cmd.Env = childEnv()
	start := time.Now()
	err := cmd.Run()
	e.set("elapsed", time.Since(start).Round(time.Millisecond).String())
	if err != nil {
		e.setErr("run", err)
		return blocked("the box could not start and wait for a subprocess", e)
	}
	e.setInt("child_pid", cmd.ProcessState.Pid())
	e.setInt("exit", cmd.ProcessState.ExitCode())
	return escaped("a subprocess started, ran and exited 0", e)
}

// workloadThreadCount is how many threads transform-threads runs at once.
const workloadThreadCount = 4

// workloadThreads runs a few goroutines each locked to an OS thread of its own
// at the same time, and checks they ran on distinct threads (distinct TIDs)
// and all finished their work.
func workloadThreads(ctx context.Context, _ probes.Params) probes.Result {
	e := ev{}
	tids := make([]int, workloadThreadCount)
	var ready, wg sync.WaitGroup
	ready.Add(workloadThreadCount)
	release := make(chan struct{})
	for i := range workloadThreadCount {
		wg.Add(1)
		go func() {
			defer wg.Done()
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			tids[i] = unix.Gettid()
			ready.Done()
			<-release // all threads are alive at once before any ends
			s := sha256.Sum256([]byte{byte(i)})
			for range 2000 {
				s = sha256.Sum256(s[:])
			}
			_ = s
		}()
	}
	done := make(chan struct{})
	go func() { ready.Wait(); close(release); wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
		return blocked("the threads did not finish before the deadline", e)
	}
	distinct := map[int]bool{}
	for _, t := range tids {
		distinct[t] = true
	}
	e.setInt("threads", workloadThreadCount)
	e.setInt("distinct_tids", len(distinct))
	if len(distinct) != workloadThreadCount {
		return blocked(fmt.Sprintf("only %d distinct threads ran", len(distinct)), e)
	}
	return escaped(fmt.Sprintf("%d threads ran at once", workloadThreadCount), e)
}

// scratchSize is how much transform-scratch writes and reads back.
const scratchSize = 1 << 20

// scratchDirs are the writable places a task would use, in order.
func scratchDirs() []string {
	dirs := []string{"/scratch"}
	if d := os.Getenv("TMPDIR"); d != "" {
		dirs = append(dirs, d)
	}
	return append(dirs, "/tmp")
}

// workloadScratch writes 1 MiB to a file in the first writable scratch place,
// syncs it, reads it back, compares and removes it.
func workloadScratch(_ context.Context, p probes.Params) probes.Result {
	e := ev{}
	data := make([]byte, scratchSize)
	for i := range data {
		data[i] = byte(i*7 + i>>8)
	}
	var tried []string
	for _, dir := range scratchDirs() {
		err := scratchRoundTrip(dir, fmt.Sprintf(".sandcheck-workload-%d-%s", os.Getpid(), fileSafe(p.Token)), data)
		if err == nil {
			e.set("dir", dir)
			e.setList("failed", tried)
			return escaped(fmt.Sprintf("wrote and read back 1 MiB in %s", dir), e)
		}
		tried = append(tried, dir+": "+err.Error())
	}
	e.setList("failed", tried)
	return blocked("no scratch place (/scratch, $TMPDIR, /tmp) could be written and read back", e)
}

func scratchRoundTrip(dir, name string, data []byte) error {
	path := filepath.Join(dir, name)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	defer os.Remove(path)
	defer f.Close()
	if _, err := f.Write(data); err != nil {
		return err
	}
	if err := f.Sync(); err != nil {
		return err
	}
	back, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	if !bytes.Equal(back, data) {
		return fmt.Errorf("read back %d bytes that differ from the %d written", len(back), len(data))
	}
	return nil
}
