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
//	sysloop open P...  opens each path once (read-only)
//	sysloop pageend P...  opens each path once (read-only), each with its
//	                   NUL the last bytes of a page before an inaccessible
//	                   one: a path shorter than 8 bytes there cannot be
//	                   read a word at a time
//	sysloop mix N      N rounds of the cheap queries in mixNames, one call of
//	                   each per round (more distinct syscalls than the
//	                   tracer's per-CPU hot counters hold)
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
	case "pageend":
		if err := openAtPageEnd(os.Args[2:]); err != nil {
			fmt.Fprintln(os.Stderr, "pageend:", err)
			os.Exit(1)
		}
	case "kinds":
		n, _ := strconv.Atoi(os.Args[2])
		for i := range n {
			for range 2 {
				unix.Open(fmt.Sprintf("%s%d", kindsPrefix, i), unix.O_RDONLY, 0)
			}
		}
	case "tree":
		n, _ := strconv.Atoi(os.Args[2])
		if err := layTree(treeDir); err != nil {
			fmt.Fprintln(os.Stderr, "tree:", err)
			os.Exit(1)
		}
		measure(func() {
			for range n {
				walkTree(treeDir)
			}
		})
	case "loop":
		n, _ := strconv.Atoi(os.Args[2])
		measure(func() {
			for range n {
				unix.Syscall(unix.SYS_GETPPID, 0, 0, 0)
			}
		})
	case "io":
		n, _ := strconv.Atoi(os.Args[2])
		in, err1 := unix.Open("/dev/zero", unix.O_RDONLY, 0)
		out, err2 := unix.Open("/dev/null", unix.O_WRONLY, 0)
		if err1 != nil || err2 != nil {
			fmt.Fprintln(os.Stderr, "open:", err1, err2)
			os.Exit(1)
		}
		buf := make([]byte, 4096)
		measure(func() {
			for range n {
				unix.Read(in, buf)
				unix.Write(out, buf)
			}
		})
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

// measure runs f on one locked OS thread and prints its wall nanoseconds and
// the CPU nanoseconds (user+system) that thread used: the CPU figure leaves
// out time spent waiting for a core on a busy host.
func measure(f func()) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var r0, r1 unix.Rusage
	unix.Getrusage(unix.RUSAGE_THREAD, &r0)
	t0 := time.Now()
	f()
	wall := time.Since(t0)
	unix.Getrusage(unix.RUSAGE_THREAD, &r1)
	cpu := unix.TimevalToNsec(r1.Utime) - unix.TimevalToNsec(r0.Utime) + unix.TimevalToNsec(r1.Stime) - unix.TimevalToNsec(r0.Stime)
	fmt.Println(wall.Nanoseconds(), cpu)
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
// syscalls, 4 KiB at a time.
func walkTree(dir string) {
	top, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY, 0)
	if err != nil {
		return
	}
	defer unix.Close(top)
	buf := make([]byte, 4096)
	for _, d := range entries(top) {
		sub, err := unix.Openat(top, d, unix.O_RDONLY|unix.O_DIRECTORY, 0)
		if err != nil {
			continue
		}
		for _, f := range entries(sub) {
			fd, err := unix.Openat(sub, f, unix.O_RDONLY, 0)
			if err != nil {
				continue
			}
			for {
				if n, err := unix.Read(fd, buf); n <= 0 || err != nil {
					break
				}
			}
			unix.Close(fd)
		}
		unix.Close(sub)
	}
}

// entries lists a directory's names (not . and ..) with getdents64.
func entries(fd int) []string {
	var names []string
	buf := make([]byte, 8192)
	for range 1024 {
		n, err := unix.ReadDirent(fd, buf)
		if n <= 0 || err != nil {
			break
		}
		_, _, names = unix.ParseDirent(buf[:n], -1, names)
	}
	return names
}
