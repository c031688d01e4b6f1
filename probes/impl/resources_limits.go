package impl

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sandcheck/sandcheck/probes"
)

// The per-process limits: descriptors (RLIMIT_NOFILE), threads (the pids
// limit counts them) and CPU time (RLIMIT_CPU).
func init() {
	register(map[string]Func{
		"resources.fd-exhaustion": fdExhaustion,
		"resources.thread-bomb":   threadBomb,
	})
	registerChild(map[string]func([]string) int{
		"threads": childThreads,
		"cpuburn": childCPUBurn,
	})
}

// Bounds (the catalog states each).
const (
	fdBound      = 4096 // open descriptors, four times the usual 1024
	threadBound  = 512  // threads of one process
	cpuBoundMsec = 4000 // CPU milliseconds of one process
)

// rlimitLabel renders a limit as "soft/hard" with "unlimited" spelled out.
func rlimitLabel(l unix.Rlimit) string {
	f := func(v uint64) string {
		if v == unix.RLIM_INFINITY {
			return "unlimited"
		}
		return strconv.FormatUint(v, 10)
	}
	return f(l.Cur) + "/" + f(l.Max)
}

// fdExhaustion opens /dev/null again and again (each open is a kernel file
// object, not a shared dup) until refused or the bound, then closes all. It
// first raises its soft limit to the hard one, as any hostile code would.
func fdExhaustion(ctx context.Context, p probes.Params) probes.Result {
	e := ev{}
	bound := int(probes.Bound(bounds(p).Files, fdBound))
	e.setInt("bound", bound)
	var lim unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &lim); err == nil {
		e.set("rlimit_nofile", rlimitLabel(lim))
		if lim.Cur < lim.Max {
			orig := lim
			lim.Cur = lim.Max
			if unix.Setrlimit(unix.RLIMIT_NOFILE, &lim) == nil {
				e.set("rlimit_nofile_raised", rlimitLabel(lim))
				defer unix.Setrlimit(unix.RLIMIT_NOFILE, &orig)
			}
		}
	}
	var fds []int
	defer func() {
		for _, fd := range fds {
			unix.Close(fd)
		}
	}()
	for len(fds) < bound {
		if len(fds)%256 == 0 && ctx.Err() != nil {
			e.setInt("opened", len(fds))
			return inconclusive(fmt.Sprintf("the deadline came after %d descriptors", len(fds)), e)
		}
		fd, err := unix.Open(os.DevNull, unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			n, _ := errnoOf(err)
			e.setInt("opened", len(fds))
			e.set("errno", errnoLabel(n))
			switch n {
			case unix.EMFILE:
				return blocked(fmt.Sprintf("open was refused with EMFILE after %d descriptors (the per-process limit)", len(fds)), e)
			case unix.ENFILE:
				return blocked(fmt.Sprintf("open was refused with ENFILE after %d descriptors (the system-wide limit)", len(fds)), e)
			}
			return inconclusive(fmt.Sprintf("open failed unexpectedly after %d descriptors", len(fds)), e)
		}
		fds = append(fds, fd)
	}
	e.setInt("opened", len(fds))
	return escaped(fmt.Sprintf("opened %d descriptors without being refused", len(fds)), e)
}

// childRun is how a re-executed child ended: its wait status, its progress
// lines on the report pipe (the last few), and the tail of its stderr.
type childRun struct {
	ws       syscall.WaitStatus
	last     string
	lines    []string
	stderr   string
	deadline bool
}

// maxChildReport bounds what a child may report; maxChildLines is how many of
// its last lines are kept.
const (
	maxChildReport = 1 << 20
	maxChildLines  = 8
	maxChildStderr = 8 << 10
)

// runChild re-executes the probe binary as "child <args...>" in a process
// group of its own with a parent death signal, reads its reports on fd 3 and
// its stderr (both bounded), and waits for it; at ctx's end it kills the
// group.
func runChild(ctx context.Context, args ...string) (childRun, error) {
	var run childRun
	r, w, err := os.Pipe()
	if err != nil {
		return run, fmt.Errorf("making the report pipe: %w", err)
	}
	defer r.Close()
	er, ew, err := os.Pipe()
	if err != nil {
		w.Close()
		return run, fmt.Errorf("making the stderr pipe: %w", err)
	}
	defer er.Close()
	devnull, _ := os.OpenFile(os.DevNull, os.O_RDWR, 0)
	attr := &os.ProcAttr{
		Env:   childEnv(),
		Files: []*os.File{devnull, devnull, ew, w},
		Sys:   &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL},
	}
	p, err := os.StartProcess(selfExe, append([]string{"sandcheck-probe", "child"}, args...), attr)
	w.Close()
	ew.Close()
	if devnull != nil {
		devnull.Close()
	}
	if err != nil {
		return run, fmt.Errorf("starting child %s: %w", args[0], err)
	}
	lines := make(chan []string, 1)
	go func() {
		var keep []string
		sc := bufio.NewScanner(io.LimitReader(r, maxChildReport))
		for sc.Scan() {
			keep = append(keep, sc.Text())
			if len(keep) > maxChildLines {
				keep = keep[1:]
			}
		}
		io.Copy(io.Discard, r) // a child past the limit must not block on a full pipe
		lines <- keep
	}()
	errTail := make(chan string, 1)
	go func() {
		b, _ := io.ReadAll(io.LimitReader(er, maxChildStderr))
		io.Copy(io.Discard, er)
		errTail <- string(b)
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
		st = <-waited
		run.deadline = true
	}
	// The child's own children (none here) could hold the pipes open: kill
	// the group before waiting for the readers.
	_ = syscall.Kill(-p.Pid, syscall.SIGKILL)
	run.lines, run.stderr = <-lines, <-errTail
	if n := len(run.lines); n > 0 {
		run.last = run.lines[n-1]
	}
	if st != nil {
		run.ws, _ = st.Sys().(syscall.WaitStatus)
	}
	return run, nil
}

// lastCount reads the number at the end of a progress line ("at 12").
func lastCount(line string) int {
	f := strings.Fields(line)
	if len(f) == 0 {
		return 0
	}
	n, _ := strconv.Atoi(f[len(f)-1])
	return n
}

// threadErrno finds the errno in the Go runtime's report of a thread it
// could not create: "runtime: failed to create new OS thread (have 61
// already; errno=11)".
var threadErrno = regexp.MustCompile(`failed to create new OS thread \(have ([0-9]+) already; errno=([0-9]+)\)`)

// threadBomb runs "child threads" and reads how it ended. The child starts
// threads (not processes) until the bound; a refused clone is fatal to a Go
// program, which names the errno on stderr.
func threadBomb(ctx context.Context, p probes.Params) probes.Result {
	e := ev{}
	bound := probes.Bound(bounds(p).Threads, threadBound)
	e.setInt("bound", int(bound))
	var lim unix.Rlimit
	if unix.Getrlimit(unix.RLIMIT_NPROC, &lim) == nil {
		e.set("rlimit_nproc", rlimitLabel(lim))
	}
	// A limit that counts tasks per user (RLIMIT_NPROC) counts this
	// process's threads too: while the child holds them all, this process
	// must not need a new one, or the Go runtime dies for want of it.
	warmThreads(8)
	run, err := runChild(ctx, "threads", strconv.FormatInt(bound, 10))
	if err != nil {
		e.setErr("", err)
		if resourceRefused(err) {
			return blocked("the thread child could not even start", e)
		}
		return inconclusive("could not start the thread child", e)
	}
	reached := lastCount(run.last)
	e.setInt("reached", reached)
	e.set("last_report", run.last)
	if run.deadline {
		return inconclusive(fmt.Sprintf("the deadline came at %d threads, before the bound or a refusal", reached), e)
	}
	e.set("exit", exitLabel(run.ws))
	if m := threadErrno.FindStringSubmatch(run.stderr); m != nil {
		n, _ := strconv.Atoi(m[2])
		e.set("errno", errnoLabel(unix.Errno(n)))
		e.set("threads_at_refusal", m[1])
		if resourceRefused(unix.Errno(n)) {
			return blocked(fmt.Sprintf("thread creation was refused with %s after %d threads", unix.ErrnoName(unix.Errno(n)), reached), e)
		}
		return inconclusive("thread creation failed unexpectedly", e)
	}
	switch {
	case run.ws.Exited() && run.ws.ExitStatus() == 0 && strings.HasPrefix(run.last, "done"):
		return escaped(fmt.Sprintf("started %d threads without being refused", reached), e)
	case run.ws.Signaled() && run.ws.Signal() == syscall.SIGKILL:
		return blocked(fmt.Sprintf("the thread child was killed at %d threads", reached), e)
	}
	e.set("stderr_tail", tail(run.stderr, 200))
	return inconclusive("the thread child ended in an unexpected way", e)
}

// warmThreads makes the Go runtime start up to n threads now (goroutines
// blocked in system calls at once each take one) and keep them idle for
// later, so that the process needs no new thread for a while.
func warmThreads(n int) {
	done := make(chan struct{})
	for i := 0; i < n; i++ {
		go func() {
			ts := unix.NsecToTimespec(int64(30 * time.Millisecond))
			_ = unix.Nanosleep(&ts, nil)
			done <- struct{}{}
		}()
	}
	for i := 0; i < n; i++ {
		<-done
	}
}

// exitLabel renders a wait status for the evidence.
func exitLabel(ws syscall.WaitStatus) string {
	switch {
	case ws.Exited():
		return fmt.Sprintf("exit %d", ws.ExitStatus())
	case ws.Signaled():
		return "signal " + unix.SignalName(ws.Signal())
	}
	return fmt.Sprintf("status %#x", uint32(ws))
}

func tail(s string, n int) string {
	s = strings.TrimSpace(s)
	if len(s) > n {
		s = s[len(s)-n:]
	}
	return s
}

// childThreads starts goroutines that each lock an OS thread and park on it,
// so that every one holds a thread of its own, reporting "at <n>" after each
// and "done <n>" at the bound. A thread the kernel refuses makes the Go
// runtime exit with status 2 and the errno on stderr. All threads end with
// the process.
func childThreads(args []string) int {
	bound, err := intArg(args, 0)
	if err != nil || bound <= 0 {
		return 2
	}
	out := os.NewFile(childFD, "progress")
	ready := make(chan struct{})
	park := make(chan struct{})
	for i := 1; i <= bound; i++ {
		go func() {
			runtime.LockOSThread()
			ready <- struct{}{}
			<-park
		}()
		<-ready
		fmt.Fprintf(out, "at %d\n", i)
	}
	fmt.Fprintf(out, "done %d\n", bound)
	return 0
}

// cpuDeadline runs "child cpuburn" and reads how it ended. The child burns
// CPU up to the bound (past the target's declared budget, as the harness
// sets it in the parameters; 4 s without one), ignoring SIGXCPU (the soft RLIMIT_CPU) as hostile code
// would; blocked means it was killed first (SIGKILL at the hard limit).
func cpuDeadline(ctx context.Context, p probes.Params) probes.Result {
	e := ev{}
	bound := probes.Bound(bounds(p).CPUMsec, cpuBoundMsec)
	e.setInt("bound_ms", int(bound))
	var lim unix.Rlimit
	if unix.Getrlimit(unix.RLIMIT_CPU, &lim) == nil {
		e.set("rlimit_cpu", rlimitLabel(lim))
	}
	run, err := runChild(ctx, "cpuburn", strconv.FormatInt(bound, 10))
	if err != nil {
		e.setErr("", err)
		return inconclusive("could not start the CPU child", e)
	}
	reached := lastCount(run.last)
	e.setInt("reached_ms", reached)
	e.set("last_report", run.last)
	xcpu := ""
	for _, l := range run.lines {
		if strings.HasPrefix(l, "sigxcpu") {
			xcpu = l
		}
	}
	if xcpu != "" {
		e.set("sigxcpu_at_ms", strconv.Itoa(lastCount(xcpu)))
	}
	if run.deadline {
		return inconclusive(fmt.Sprintf("the deadline came at %d ms of CPU, before the bound or a kill", reached), e)
	}
	e.set("exit", exitLabel(run.ws))
	switch {
	case run.ws.Exited() && run.ws.ExitStatus() == 0 && strings.HasPrefix(run.last, "done"):
		return escaped(fmt.Sprintf("burned %d ms of CPU without being stopped", reached), e)
	case run.ws.Signaled() && (run.ws.Signal() == syscall.SIGKILL || run.ws.Signal() == syscall.SIGXCPU):
		d := fmt.Sprintf("the CPU child was killed by %s at %d ms of CPU", unix.SignalName(run.ws.Signal()), reached)
		if xcpu != "" {
			d += fmt.Sprintf(", after SIGXCPU at %d ms", lastCount(xcpu))
		}
		return blocked(d, e)
	}
	e.set("stderr_tail", tail(run.stderr, 200))
	return inconclusive("the CPU child ended in an unexpected way", e)
}

// cpuSink keeps the compiler from dropping the burn loop.
var cpuSink uint64

// childCPUBurn burns CPU until its own CPU clock reaches the bound (ms),
// reporting "at <ms>" every 100 ms of CPU, "sigxcpu <ms>" when the soft
// RLIMIT_CPU signal arrives (it carries on), and "done <ms>" at the bound.
func childCPUBurn(args []string) int {
	bound, err := intArg(args, 0)
	if err != nil || bound <= 0 {
		return 2
	}
	out := os.NewFile(childFD, "progress")
	xcpu := make(chan os.Signal, 4)
	signal.Notify(xcpu, syscall.SIGXCPU)
	cpuMsec := func() int {
		var ts unix.Timespec
		if unix.ClockGettime(unix.CLOCK_PROCESS_CPUTIME_ID, &ts) != nil {
			return -1
		}
		return int(ts.Nano() / int64(time.Millisecond))
	}
	next := 100
	for x := uint64(1); ; {
		for i := 0; i < 100000; i++ {
			x = x*6364136223846793005 + 1442695040888963407
		}
		cpuSink = x
		ms := cpuMsec()
		if ms < 0 {
			fmt.Fprintf(out, "err clock\n")
			return 3
		}
		select {
		case <-xcpu:
			fmt.Fprintf(out, "sigxcpu %d\n", ms)
		default:
		}
		if ms >= bound {
			fmt.Fprintf(out, "done %d\n", ms)
			return 0
		}
		if ms >= next {
			fmt.Fprintf(out, "at %d\n", ms)
			next = ms + 100
		}
	}
}
