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
//	sysloop wait MODE  waits for a line on stdin (a go-ahead), then execs
//	                   itself as "sysloop MODE"
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
		err := syscall.Exec(exe, []string{exe, os.Args[2]}, os.Environ())
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
