package impl

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sandcheck/sandcheck/probes"
)

// Processes that try to outlive their task. Each is a pair probe: the plant
// task starts a process that lingers (for lingerLife at most, on its own)
// and ends; the check task, the next one the target hands out, looks for it
// by its command line and kills it. Found means the box let a task's process
// meet the next task.
func init() {
	register(map[string]Func{"persistence.background-process": backgroundProcess})
	registerChild(map[string]func([]string) int{"linger": childLinger})
}

// lingerLife bounds a lingering process's life on its own: long enough to
// meet the next task, short enough that a check that never comes leaves
// nothing for long.
const lingerLife = 90 * time.Second

// lingerKinds say how the process tries to survive: a plain background
// child; one that ignores SIGTERM, SIGHUP and SIGINT; a double-forked
// daemon in a session of its own (no process group or terminal ties it to
// the task).
var lingerKinds = map[string]string{
	"plain":  "a background process",
	"noterm": "a process ignoring SIGTERM, SIGHUP and SIGINT",
	"daemon": "a double-forked setsid daemon",
}

// backgroundProcess plants or looks for a plain background process.
func backgroundProcess(ctx context.Context, p probes.Params) probes.Result {
	return lingerProbe(ctx, p, "plain")
}

// lingerProbe plants (phase plant) or looks for (phase check) a lingering
// process of one kind; the probes of each family name their kind.
func lingerProbe(ctx context.Context, p probes.Params, kind string) probes.Result {
	marker := fileSafe(p.Marker)
	e := ev{}
	if marker == "" {
		return inconclusive("no marker given (--marker)", e)
	}
	switch p.Phase {
	case "plant":
		return plantLinger(ctx, kind, marker, e)
	case "check":
		return checkLinger(kind, marker, e)
	}
	return inconclusive(fmt.Sprintf("phase %q: want plant or check", p.Phase), e)
}

// plantLinger starts the lingering process and waits for it to say it is up
// (its pid and session) before the task ends.
func plantLinger(ctx context.Context, kind, marker string, e ev) probes.Result {
	r, w, err := os.Pipe()
	if err != nil {
		e.setErr("", err)
		return inconclusive("could not make the report pipe", e)
	}
	defer r.Close()
	devnull, err := os.OpenFile(os.DevNull, os.O_RDWR, 0)
	if err != nil {
		w.Close()
		e.setErr("", err)
		return inconclusive("could not open /dev/null", e)
	}
	// No parent death signal and no process group of the task's own: the
	// process must be free to outlive the task. Its stdio is /dev/null, so
	// it holds none of the task's output open.
	attr := &os.ProcAttr{Dir: "/", Env: childEnv(), Files: []*os.File{devnull, devnull, devnull, w}}
	proc, err := os.StartProcess(selfExe, []string{"sandcheck-probe", "child", "linger", kind, marker,
		strconv.Itoa(int(lingerLife / time.Second))}, attr)
	w.Close()
	devnull.Close()
	if err != nil {
		e.setErr("", err)
		if resourceRefused(err) {
			return result(probes.NotApplicable, "the box refused to start the process; the check phase decides", e)
		}
		return inconclusive("could not start the lingering process", e)
	}
	if kind == "daemon" {
		// The first fork exits at once; its child carries on in a new session.
		st, _ := proc.Wait()
		if st != nil {
			e.set("first_fork", exitLabel(st.Sys().(syscall.WaitStatus)))
		}
	} else {
		proc.Release()
	}
	up := make(chan string, 1)
	go func() {
		line, _ := bufio.NewReader(io.LimitReader(r, 256)).ReadString('\n')
		up <- strings.TrimSpace(line)
	}()
	select {
	case line := <-up:
		if !strings.HasPrefix(line, "up ") {
			e.set("report", line)
			return inconclusive("the lingering process did not come up", e)
		}
		e.set("planted", line)
	case <-time.After(10 * time.Second):
		return inconclusive("the lingering process did not report within 10s", e)
	case <-ctx.Done():
		return inconclusive("the deadline came before the lingering process reported", e)
	}
	return result(probes.NotApplicable, fmt.Sprintf("started %s; the check phase decides", lingerKinds[kind]), e)
}

// Bounds on the process table walk of the check phase.
const (
	maxProcScan    = 8192
	maxCmdlineRead = 4096
)

// checkLinger walks /proc for a process whose command line is this probe's
// lingering child with this marker, kills every one found and reports them.
func checkLinger(kind, marker string, e ev) probes.Result {
	running := kind
	if kind == "daemon" {
		running = "detached" // the daemon's second fork is the one that lingers
	}
	want := []string{"child", "linger", running, marker}
	ents, err := os.ReadDir("/proc")
	if err != nil {
		e.setErr("", err)
		return inconclusive("could not list /proc", e)
	}
	self := os.Getpid()
	var found []string
	scanned := 0
	for _, d := range ents {
		pid, err := strconv.Atoi(d.Name())
		if err != nil || pid == self {
			continue
		}
		if scanned++; scanned > maxProcScan {
			break
		}
		argv, ok := readCmdline(pid)
		if !ok || !hasArgs(argv, want) {
			continue
		}
		sid, _ := unix.Getsid(pid)
		found = append(found, fmt.Sprintf("pid %d (session %d, parent %s)", pid, sid, procPPid(pid)))
		_ = unix.Kill(pid, unix.SIGKILL)
	}
	e.setInt("processes_scanned", min(scanned, maxProcScan))
	if len(found) == 0 {
		return blocked(fmt.Sprintf("nothing the earlier task started (%s) is still running", lingerKinds[kind]), e)
	}
	e.setList("found", found)
	return escaped(fmt.Sprintf("%s started by the earlier task is still running (killed now): %s", lingerKinds[kind], strings.Join(found, ", ")), e)
}

// readCmdline reads a process's argv, bounded; a process that went away or
// hides its command line gives false.
func readCmdline(pid int) ([]string, bool) {
	fd, err := unix.Open(filepath.Join("/proc", strconv.Itoa(pid), "cmdline"), unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, false
	}
	defer unix.Close(fd)
	buf := make([]byte, maxCmdlineRead)
	n, err := unix.Read(fd, buf)
	if err != nil || n <= 0 {
		return nil, false
	}
	return strings.Split(strings.TrimRight(string(buf[:n]), "\x00"), "\x00"), true
}

// hasArgs reports whether want appears in argv as consecutive arguments.
func hasArgs(argv, want []string) bool {
	for i := 0; i+len(want) <= len(argv); i++ {
		match := true
		for j, w := range want {
			if argv[i+j] != w {
				match = false
				break
			}
		}
		if match {
			return true
		}
	}
	return false
}

// procPPid reads a process's parent pid from /proc/PID/stat, bounded.
func procPPid(pid int) string {
	fd, err := unix.Open(filepath.Join("/proc", strconv.Itoa(pid), "stat"), unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return "?"
	}
	defer unix.Close(fd)
	buf := make([]byte, 1024)
	n, _ := unix.Read(fd, buf)
	if n <= 0 {
		return "?"
	}
	// The command name may hold spaces and parentheses: fields start after
	// the last ')'.
	i := bytes.LastIndexByte(buf[:n], ')')
	f := strings.Fields(string(buf[i+1 : n]))
	if i < 0 || len(f) < 2 {
		return "?"
	}
	return f[1]
}

// childLinger is the lingering process: "linger <kind> <marker> <seconds>".
// It reports "up <pid> <sid>" on fd 3 (then closes it) and sleeps for its
// life. kind noterm first ignores SIGTERM, SIGHUP and SIGINT; kind daemon
// starts itself again in a new session (the second fork) and exits, so that
// the process that lingers is an orphan of no task's session.
func childLinger(args []string) int {
	if len(args) != 3 {
		return 2
	}
	kind, marker := args[0], args[1]
	secs, err := intArg(args, 2)
	if err != nil || secs <= 0 || secs > int(lingerLife/time.Second) || lingerKinds[kind] == "" && kind != "detached" {
		return 2
	}
	report := os.NewFile(childFD, "report")
	switch kind {
	case "daemon":
		devnull, err := os.OpenFile(os.DevNull, os.O_RDWR, 0)
		if err != nil {
			return 3
		}
		_, err = os.StartProcess(selfExe, []string{"sandcheck-probe", "child", "linger", "detached", marker, args[2]},
			&os.ProcAttr{Dir: "/", Env: childEnv(), Files: []*os.File{devnull, devnull, devnull, report},
				Sys: &syscall.SysProcAttr{Setsid: true}})
		if err != nil {
			fmt.Fprintf(report, "err %v\n", err)
			return 3
		}
		return 0
	case "noterm":
		signal.Ignore(syscall.SIGTERM, syscall.SIGHUP, syscall.SIGINT)
	}
	sid, _ := unix.Getsid(0)
	fmt.Fprintf(report, "up %d %d\n", os.Getpid(), sid)
	report.Close()
	time.Sleep(time.Duration(secs) * time.Second)
	return 0
}
