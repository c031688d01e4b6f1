// Command sysloop makes a known syscall sequence for the tracer's tests:
//
//	sysloop known      getppid x1234, setns(-1) x7 (EBADF), one open of
//	                   /etc/shadow.sandcheck-test (ENOENT), one connect to
//	                   127.0.0.1:9 (refused or EPERM), then acct x3 and
//	                   unshare(0) x1: under a seccomp filter (see "seccomp")
//	                   acct answers EPERM
//	sysloop seccomp    installs a filter answering EPERM to acct, then "known"
//	sysloop loop N     N getppid calls, for the overhead benchmark; prints
//	                   the loop's wall and CPU (user+system) nanoseconds
//	sysloop io N       N 4 KiB reads of /dev/zero, each written to /dev/null
//	                   (2N syscalls); prints wall and CPU nanoseconds
//	sysloop wait MODE [ARG]  waits for a line on stdin (a go-ahead), then
//	                   execs itself as "sysloop MODE [ARG]"
//	sysloop hold N     prints "ready", calls getuid for 1.5 s, then getppid
//	                   N times: a process busy when a watch begins
//	sysloop tree N     lays out 512 files of 16 KiB in 16 folders (not
//	                   timed), then walks and reads the whole tree N times
//	                   as a search through a source tree would (getdents64,
//	                   openat, read until EOF, close); prints wall and CPU
//	                   nanoseconds
//	sysloop kinds N    opens N distinct missing files under
//	                   /etc/shadow.sandcheck-kinds- twice each (ENOENT):
//	                   more kinds of interesting calls than a tree may
//	                   stream
//	sysloop kindsfilter N  "kinds N", then asks for a seccomp filter with no
//	                   program, once through seccomp(SECCOMP_SET_MODE_FILTER)
//	                   and once through prctl(PR_SET_SECCOMP) (both EFAULT:
//	                   nothing is installed), and calls prctl(PR_GET_DUMPABLE)
//	sysloop open P...  opens each path once (read-only)
//	sysloop openat P...  opens each path once (read-only) from a descriptor
//	                   of / (openat with a directory descriptor)
//	sysloop pageend P...  opens each path once (read-only), each with its
//	                   NUL the last bytes of a page before an inaccessible
//	                   one: a path shorter than 8 bytes there cannot be
//	                   read a word at a time
//	sysloop mix N      N rounds of the cheap queries in mixNames, one call of
//	                   each per round (more distinct syscalls than the
//	                   tracer's per-CPU hot counters hold)
//	sysloop serve MODE N  prepares workload MODE (loop, io, tree, or absopen:
//	                   N opens of one file by its absolute path, each closed) with
//	                   argument N, prints "ready", then runs it once per line
//	                   read on stdin, all on the thread that was running
//	                   when it printed "ready", and prints each run's wall
//	                   and CPU nanoseconds and the syscalls it made; ends at
//	                   EOF
//
// It is static (CGO_ENABLED=0) so it runs in a FROM-scratch image.
package main

import (
	"bufio"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"syscall"
	"time"
	"unsafe"

	seccomp "github.com/elastic/go-seccomp-bpf"
	"golang.org/x/sys/unix"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: sysloop known|seccomp|loop N|wait")
		os.Exit(2)
	}
	switch os.Args[1] {
	case "wait":
		bufio.NewReader(os.Stdin).ReadString('\n')
		exe, _ := os.Executable()
		err := syscall.Exec(exe, append([]string{exe}, os.Args[2:]...), os.Environ())
		fmt.Fprintln(os.Stderr, "exec:", err)
		os.Exit(1)
	case "seccomp":
		p := seccomp.Policy{DefaultAction: seccomp.ActionAllow, Syscalls: []seccomp.SyscallGroup{
			{Action: seccomp.ActionErrno, Names: []string{"acct"}},
		}}
		if err := seccomp.LoadFilter(seccomp.Filter{NoNewPrivs: true, Flag: seccomp.FilterFlagTSync, Policy: p}); err != nil {
			fmt.Fprintln(os.Stderr, "seccomp:", err)
			os.Exit(1)
		}
		known()
	case "known":
		known()
	case "hold":
		n, _ := strconv.Atoi(os.Args[2])
		runtime.LockOSThread()
		fmt.Println("ready")
		for t0 := time.Now(); time.Since(t0) < 1500*time.Millisecond; {
			unix.Syscall(unix.SYS_GETUID, 0, 0, 0)
		}
		for range n {
			unix.Syscall(unix.SYS_GETPPID, 0, 0, 0)
		}
	case "mix":
		n, _ := strconv.Atoi(os.Args[2])
		mix(n)
	case "open":
		for _, p := range os.Args[2:] {
			unix.Open(p, unix.O_RDONLY, 0)
		}
	case "openat":
		dir, err := unix.Open("/", unix.O_RDONLY|unix.O_DIRECTORY, 0)
		if err != nil {
			fmt.Fprintln(os.Stderr, "openat:", err)
			os.Exit(1)
		}
		for _, p := range os.Args[2:] {
			unix.Openat(dir, p, unix.O_RDONLY, 0)
		}
	case "pageend":
		if err := openAtPageEnd(os.Args[2:]); err != nil {
			fmt.Fprintln(os.Stderr, "pageend:", err)
			os.Exit(1)
		}
	case "kindsfilter":
		n, _ := strconv.Atoi(os.Args[2])
		for i := range n {
			for range 2 {
				unix.Open(fmt.Sprintf("%s%d", kindsPrefix, i), unix.O_RDONLY, 0)
			}
		}
		unix.Syscall(unix.SYS_SECCOMP, 1, 0, 0)
		unix.Syscall6(unix.SYS_PRCTL, unix.PR_SET_SECCOMP, 2, 0, 0, 0, 0)
		unix.Syscall6(unix.SYS_PRCTL, unix.PR_GET_DUMPABLE, 0, 0, 0, 0, 0)
	case "kinds":
		n, _ := strconv.Atoi(os.Args[2])
		for i := range n {
			for range 2 {
				unix.Open(fmt.Sprintf("%s%d", kindsPrefix, i), unix.O_RDONLY, 0)
			}
		}
	case "tree", "loop", "io":
		n, _ := strconv.Atoi(os.Args[2])
		runtime.LockOSThread()
		f, err := workload(os.Args[1], n)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		wall, cpu, _ := measure(f)
		fmt.Println(wall, cpu)
	case "serve":
		n, _ := strconv.Atoi(os.Args[3])
		// Every run is on this thread, which exists before a watch that
		// begins after "ready" attributes the process's threads.
		runtime.LockOSThread()
		f, err := workload(os.Args[2], n)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		fmt.Println("ready")
		in := bufio.NewScanner(os.Stdin)
		for in.Scan() {
			wall, cpu, calls := measure(f)
			fmt.Println(wall, cpu, calls)
		}
	}
}

// openAtPageEnd opens each path with its NUL the last byte of a page that an
// inaccessible page follows.
func openAtPageEnd(paths []string) error {
	pg := os.Getpagesize()
	mem, err := unix.Mmap(-1, 0, 2*pg, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		return err
	}
	if err := unix.Mprotect(mem[pg:], unix.PROT_NONE); err != nil {
		return err
	}
	cwd := unix.AT_FDCWD
	for _, p := range paths {
		off := pg - len(p) - 1
		if off < 0 {
			return fmt.Errorf("path %q longer than a page", p)
		}
		copy(mem[off:], p)
		mem[pg-1] = 0
		fd, _, errno := unix.Syscall6(unix.SYS_OPENAT, uintptr(cwd), uintptr(unsafe.Pointer(&mem[off])), unix.O_RDONLY, 0, 0, 0)
		if errno == 0 {
			unix.Close(int(fd))
		}
	}
	return nil
}

// workload prepares one of the benchmark's workloads (not timed) and returns
// it; each run returns the syscalls it made.
func workload(mode string, n int) (func() int, error) {
	switch mode {
	case "tree":
		if err := layTree(treeDir); err != nil {
			return nil, fmt.Errorf("tree: %w", err)
		}
		return func() int {
			calls := 0
			for range n {
				calls += walkTree(treeDir)
			}
			return calls
		}, nil
	case "absopen":
		if err := layTree(treeDir); err != nil {
			return nil, fmt.Errorf("absopen: %w", err)
		}
		path := treeDir + "/d00/f00"
		return func() int {
			for range n {
				fd, err := unix.Open(path, unix.O_RDONLY, 0)
				if err == nil {
					unix.Close(fd)
				}
			}
			return 2 * n
		}, nil
	case "loop":
		return func() int {
			for range n {
				unix.Syscall(unix.SYS_GETPPID, 0, 0, 0)
			}
			return n
		}, nil
	case "io":
		in, err1 := unix.Open("/dev/zero", unix.O_RDONLY, 0)
		out, err2 := unix.Open("/dev/null", unix.O_WRONLY, 0)
		if err1 != nil || err2 != nil {
			return nil, fmt.Errorf("open: %v %v", err1, err2)
		}
		buf := make([]byte, 4096)
		return func() int {
			for range n {
				unix.Read(in, buf)
				unix.Write(out, buf)
			}
			return 2 * n
		}, nil
	}
	return nil, fmt.Errorf("unknown workload %q", mode)
}

// measure runs f on the calling thread, which must be locked to its
// goroutine, and returns its wall nanoseconds, the CPU nanoseconds
// (user+system) that thread used and f's result: the CPU figure leaves out
// time spent waiting for a core on a busy host. The thread's CPU clock is
// read to the nanosecond (CLOCK_THREAD_CPUTIME_ID), where getrusage would
// leave out what the thread ran since the last scheduler tick (up to 4 ms).
func measure(f func() int) (wall, cpu int64, calls int) {
	var c0, c1 unix.Timespec
	unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &c0)
	t0 := time.Now()
	calls = f()
	wall = time.Since(t0).Nanoseconds()
	unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &c1)
	return wall, c1.Nano() - c0.Nano(), calls
}

func known() {
	for range 1234 {
		unix.Syscall(unix.SYS_GETPPID, 0, 0, 0)
	}
	for range 7 {
		unix.Syscall(unix.SYS_SETNS, ^uintptr(0), 0, 0)
	}
	unix.Open("/etc/shadow.sandcheck-test", unix.O_RDONLY, 0)
	if fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM, 0); err == nil {
		unix.Connect(fd, &unix.SockaddrInet4{Port: 9, Addr: [4]byte{127, 0, 0, 1}})
		unix.Close(fd)
	}
	for range 3 {
		unix.Syscall(unix.SYS_ACCT, 0, 0, 0)
	}
	unix.Syscall(unix.SYS_UNSHARE, 0, 0, 0)
}

// mixCalls are cheap queries with harmless arguments that the Go runtime
// itself does not make, so a test can expect exact counts of each.
var mixCalls = []struct {
	nr         uintptr
	a0, a1, a2 uintptr
}{
	{unix.SYS_GETPPID, 0, 0, 0}, {unix.SYS_GETUID, 0, 0, 0}, {unix.SYS_GETEUID, 0, 0, 0},
	{unix.SYS_GETGID, 0, 0, 0}, {unix.SYS_GETEGID, 0, 0, 0}, {unix.SYS_GETPGRP, 0, 0, 0},
	{unix.SYS_GETSID, 0, 0, 0}, {unix.SYS_GETPGID, 0, 0, 0}, {unix.SYS_GETGROUPS, 0, 0, 0},
	{unix.SYS_GETPRIORITY, unix.PRIO_PROCESS, 0, 0}, {unix.SYS_SCHED_GETSCHEDULER, 0, 0, 0},
	{unix.SYS_SCHED_GET_PRIORITY_MAX, 0, 0, 0}, {unix.SYS_SCHED_GET_PRIORITY_MIN, 0, 0, 0},
	{unix.SYS_PERSONALITY, 0xffffffff, 0, 0}, {unix.SYS_PRCTL, unix.PR_GET_DUMPABLE, 0, 0},
	{unix.SYS_IOPRIO_GET, 1, 0, 0}, {unix.SYS_GETCPU, 0, 0, 0}, {unix.SYS_TIMES, 0, 0, 0},
	{unix.SYS_GETRESUID, 0, 0, 0}, {unix.SYS_GETRESGID, 0, 0, 0}, {unix.SYS_GETITIMER, 0, 0, 0},
	{unix.SYS_UMASK, 0o22, 0, 0}, {unix.SYS_ALARM, 0, 0, 0}, {unix.SYS_SETNS, ^uintptr(0), 0, 0},
	{unix.SYS_SYNCFS, ^uintptr(0), 0, 0}, {unix.SYS_FSYNC, ^uintptr(0), 0, 0},
	{unix.SYS_DUP, ^uintptr(0), 0, 0}, {unix.SYS_CLOSE, ^uintptr(0), 0, 0}, {unix.SYS_FCHDIR, ^uintptr(0), 0, 0},
	{unix.SYS_FLOCK, ^uintptr(0), 0, 0}, {unix.SYS_FDATASYNC, ^uintptr(0), 0, 0}, {unix.SYS_LISTEN, ^uintptr(0), 0, 0},
	{unix.SYS_SHUTDOWN, ^uintptr(0), 0, 0}, {unix.SYS_GETSOCKNAME, ^uintptr(0), 0, 0}, {unix.SYS_GETPEERNAME, ^uintptr(0), 0, 0},
}

// mix makes n rounds of mixCalls on one locked thread; the arguments are
// queries or bad descriptors, so nothing changes (umask sets 022 back).
func mix(n int) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	for range n {
		for _, c := range mixCalls {
			unix.Syscall(c.nr, c.a0, c.a1, c.a2)
		}
	}
}

const treeDir = "/sysloop-tree"

// kindsPrefix starts the missing paths "kinds" opens: a sensitive prefix.
const kindsPrefix = "/etc/shadow.sandcheck-kinds-"

// layTree writes the tree walkTree reads, unless it is there already.
func layTree(dir string) error {
	if _, err := os.Stat(dir + "/d15/f31"); err == nil {
		return nil
	}
	data := make([]byte, 16<<10)
	for i := range data {
		data[i] = byte('a' + i%26)
	}
	for d := range 16 {
		sub := fmt.Sprintf("%s/d%02d", dir, d)
		if err := os.MkdirAll(sub, 0o755); err != nil {
			return err
		}
		for f := range 32 {
			if err := os.WriteFile(fmt.Sprintf("%s/f%02d", sub, f), data, 0o644); err != nil {
				return err
			}
		}
	}
	return nil
}

// walkTree reads every file under dir (one level of folders) with raw
// syscalls, 4 KiB at a time, and returns the syscalls it made.
func walkTree(dir string) int {
	top, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY, 0)
	if err != nil {
		return 1
	}
	defer unix.Close(top)
	calls := 2 // the open and close of dir
	buf := make([]byte, 4096)
	dirs, c := entries(top)
	calls += c
	for _, d := range dirs {
		sub, err := unix.Openat(top, d, unix.O_RDONLY|unix.O_DIRECTORY, 0)
		calls++
		if err != nil {
			continue
		}
		files, c := entries(sub)
		calls += c
		for _, f := range files {
			fd, err := unix.Openat(sub, f, unix.O_RDONLY, 0)
			calls++
			if err != nil {
				continue
			}
			for {
				n, err := unix.Read(fd, buf)
				calls++
				if n <= 0 || err != nil {
					break
				}
			}
			unix.Close(fd)
			calls++
		}
		unix.Close(sub)
		calls++
	}
	return calls
}

// entries lists a directory's names (not . and ..) with getdents64 and
// returns them with the calls it made.
func entries(fd int) ([]string, int) {
	var names []string
	buf := make([]byte, 8192)
	calls := 0
	for range 1024 {
		n, err := unix.ReadDirent(fd, buf)
		calls++
		if n <= 0 || err != nil {
			break
		}
		_, _, names = unix.ParseDirent(buf[:n], -1, names)
	}
	return names, calls
}
