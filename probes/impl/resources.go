package impl

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/sandcheck/sandcheck/probes"
)

func init() {
	register(map[string]Func{
		"resources.fork-bomb": forkBomb,
		"resources.memory":    memoryBomb,
	})
}

// Fork bomb bounds. The catalog bounds the bomb at 512 processes.
const (
	forkBound = 512
	// sleeperLife bounds each child's life on its own (longer than the
	// catalog's 30s timeout, so only a failed cleanup ever meets it).
	sleeperLife = 40 * time.Second
)

// resourceRefused reports errors a resource limit causes: EAGAIN from fork at
// the pids limit (or RLIMIT_NPROC), ENOMEM from fork at a memory limit.
func resourceRefused(err error) bool {
	n, ok := errnoOf(err)
	return ok && (n == unix.EAGAIN || n == unix.ENOMEM)
}

// forkBomb forks sleeping children until fork is refused or the bound is
// reached, then kills and reaps them all.
//
// The children are plain forks of the probe, not re-executions of the binary:
// a re-executed Go child costs 20-40 ms of runtime start-up on a small
// machine (512 of them overrun the catalog's 30 s) and holds several threads,
// so the pids cgroup would count three or four tasks per process. A fork that
// only sleeps is one task and costs well under a millisecond, so the bound
// means what it says and a refusal is fork's own EAGAIN.
//
// The goroutine stays on one thread throughout: the children's parent-death
// signal is tied to the thread that forked them.
func forkBomb(ctx context.Context, p probes.Params) probes.Result {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	e := ev{}
	bound := int(probes.Bound(bounds(p).Processes, forkBound))
	e.setInt("bound", bound)
	var kids []int
	defer func() { killAll(kids) }()
	ppid := uintptr(unix.Getpid())
	life := unix.NsecToTimespec(int64(sleeperLife))
	for len(kids) < bound {
		if ctx.Err() != nil {
			started := len(kids)
			killAll(kids) // free the box's pids before reporting
			kids = nil
			e.setInt("started", started)
			return inconclusive(fmt.Sprintf("the deadline came after %d processes, before the bound or a refusal", started), e)
		}
		pid, errno := forkSleeper(ppid, &life)
		if errno != 0 {
			started := len(kids)
			killAll(kids) // at once: the box is out of pids until we do
			kids = nil
			e.setInt("started", started)
			e.set("errno", errnoLabel(errno))
			if resourceRefused(errno) {
				return blocked(fmt.Sprintf("fork was refused with %s after %d processes", unix.ErrnoName(errno), started), e)
			}
			return inconclusive(fmt.Sprintf("fork failed unexpectedly after %d processes", started), e)
		}
		kids = append(kids, pid)
	}
	e.setInt("started", len(kids))
	return escaped(fmt.Sprintf("forked %d processes without being refused", len(kids)), e)
}

// killAll kills each child (and its process group) and reaps it.
func killAll(pids []int) {
	for _, pid := range pids {
		_ = unix.Kill(-pid, unix.SIGKILL)
		_ = unix.Kill(pid, unix.SIGKILL)
	}
	for _, pid := range pids {
		var ws unix.WaitStatus
		for {
			if _, err := unix.Wait4(pid, &ws, 0, nil); err != unix.EINTR {
				break
			}
		}
	}
}

// forkSleeper forks without exec. The child runs raw system calls only, the
// way syscall.forkAndExecInChild does before its exec: it is a single thread
// holding a copy of the parent's memory, where locks may be held by threads
// that do not exist in it, so it must not enter the Go runtime (hence
// nosplit: no stack growth). It sets its parent-death signal, leaves if the
// parent is already gone, closes every inherited descriptor (so that no
// sleeper holds the harness's output pipe open), moves to a process group of
// its own, sleeps for life and exits. close_range is missing on kernels
// before 5.9 and in some gVisor versions; the sleeper then keeps its
// descriptors until it is killed with the others.
//
//go:nosplit
//go:norace
func forkSleeper(ppid uintptr, life *unix.Timespec) (int, unix.Errno) {
	r1, _, errno := syscall.RawSyscall6(syscall.SYS_CLONE, uintptr(syscall.SIGCHLD), 0, 0, 0, 0, 0)
	if errno != 0 || r1 != 0 {
		return int(r1), errno
	}
	syscall.RawSyscall(syscall.SYS_PRCTL, syscall.PR_SET_PDEATHSIG, uintptr(syscall.SIGKILL), 0)
	if p, _, _ := syscall.RawSyscall(syscall.SYS_GETPPID, 0, 0, 0); p != ppid {
		syscall.RawSyscall(syscall.SYS_EXIT_GROUP, 0, 0, 0)
	}
	syscall.RawSyscall(unix.SYS_CLOSE_RANGE, 0, uintptr(^uint32(0)), 0)
	syscall.RawSyscall(syscall.SYS_SETPGID, 0, 0, 0)
	syscall.RawSyscall(syscall.SYS_NANOSLEEP, uintptr(unsafe.Pointer(life)), 0, 0)
	syscall.RawSyscall(syscall.SYS_EXIT_GROUP, 0, 0, 0)
	return 0, 0
}

// childAttr starts a re-executed child in a process group of its own (so
// that killing the group kills whatever it started) with a parent death signal
// (so that it dies if the probe does), reporting on the given file.
func childAttr(report *os.File) (*os.ProcAttr, func()) {
	devnull, err := os.OpenFile(os.DevNull, os.O_RDWR, 0)
	if err != nil {
		devnull = nil // a closed stdio is fine for a child that never uses it
	}
	return &os.ProcAttr{
			Env:   childEnv(),
			Files: []*os.File{devnull, devnull, devnull, report},
			Sys:   &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL},
		}, func() {
			if devnull != nil {
				devnull.Close()
			}
		}
}

// Memory bomb bounds (catalog: 640 MiB), touched in chunks small enough that
// progress is reported often.
const (
	memBoundMiB = 640
	memChunkMiB = 16
)

// memoryBomb runs "child memhog" and follows its progress. The bound reached
// is an escape; the child killed by SIGKILL (the OOM killer at the memory
// limit) or refused a mapping before the bound is blocked.
func memoryBomb(ctx context.Context, p probes.Params) probes.Result {
	return memHog(ctx, int(probes.Bound(bounds(p).MemoryMiB, memBoundMiB)), memChunkMiB)
}

// memHog runs the memory child with the given bound and chunk size.
func memHog(ctx context.Context, boundMiB, chunkMiB int) probes.Result {
	e := ev{}
	e.setInt("bound_mib", boundMiB)
	r, w, err := os.Pipe()
	if err != nil {
		e.setErr("", err)
		return inconclusive("could not make the progress pipe", e)
	}
	defer r.Close()
	attr, done := childAttr(w)
	p, err := os.StartProcess(selfExe, []string{"sandcheck-probe", "child", "memhog",
		strconv.Itoa(boundMiB), strconv.Itoa(chunkMiB)}, attr)
	done()
	w.Close()
	if err != nil {
		e.setErr("", err)
		if resourceRefused(err) {
			return blocked("the memory child could not even start", e)
		}
		return inconclusive("could not start the memory child", e)
	}

	var mu sync.Mutex
	var last string
	reached := 0
	readDone := make(chan struct{})
	go func() {
		defer close(readDone)
		sc := bufio.NewScanner(io.LimitReader(r, 1<<20))
		for sc.Scan() {
			f := strings.Fields(sc.Text())
			mu.Lock()
			last = sc.Text()
			if len(f) >= 2 {
				if n, err := strconv.Atoi(f[len(f)-1]); err == nil {
					reached = n
				}
			}
			mu.Unlock()
		}
	}()
	waited := make(chan *os.ProcessState, 1)
	go func() {
		st, _ := p.Wait()
		waited <- st
	}()
	var st *os.ProcessState
	select {
	case st = <-waited:
	case <-ctx.Done():
		_ = syscall.Kill(-p.Pid, syscall.SIGKILL)
		<-waited
		<-readDone
		e.setInt("reached_mib", reached)
		return inconclusive(fmt.Sprintf("the deadline came at %d MiB, before the bound or a kill", reached), e)
	}
	<-readDone
	mu.Lock()
	defer mu.Unlock()
	e.setInt("reached_mib", reached)
	e.set("exit", st.String())
	e.set("last_report", last)
	ws, _ := st.Sys().(syscall.WaitStatus)
	o, detail := classifyMemHog(ws, last, reached)
	return result(o, detail, e)
}

// classifyMemHog reads how the memory child ended: its wait status and its
// last progress report.
func classifyMemHog(ws syscall.WaitStatus, last string, reached int) (probes.Outcome, string) {
	switch {
	case ws.Exited() && ws.ExitStatus() == 0 && strings.HasPrefix(last, "done"):
		return probes.Escaped, fmt.Sprintf("touched %d MiB without being stopped", reached)
	case ws.Signaled() && ws.Signal() == syscall.SIGKILL:
		return probes.Blocked, fmt.Sprintf("the memory child was killed at %d MiB (memory limit)", reached)
	case strings.HasPrefix(last, "err ENOMEM"):
		return probes.Blocked, fmt.Sprintf("a mapping was refused at %d MiB", reached)
	}
	return probes.Inconclusive, "the memory child ended in an unexpected way"
}
