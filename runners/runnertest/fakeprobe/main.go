// Command fakeprobe stands in for sandcheck-probe in the runner conformance
// suite (package runnertest): it implements what runners rely on (hold) and
// what the suite needs inside a sandbox, without a shell, so it runs in any
// runner's sandbox.
//
//	hold --max D   sleep until SIGTERM/SIGINT or D
//	list           print the commands (the docker runner's readiness check)
//	exit N         exit with code N
//	echo2 OUT ERR  write OUT to stdout and ERR to stderr
//	flood N        write N bytes to stdout and N to stderr
//	sleep D        sleep for D
//	spawn D        start a detached child (own session) that sleeps for D,
//	               print its pid and exit at once
//	cat PATH       copy the file to stdout
//	getenv NAME    print the variable's value (exit 1 when unset)
package main

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"syscall"
	"time"
)

func main() {
	if len(os.Args) < 2 {
		fail("usage: sandcheck-probe hold|exit|echo2|flood|sleep|spawn|cat|getenv")
	}
	arg := func(i int) string {
		if len(os.Args) <= i {
			fail("missing argument")
		}
		return os.Args[i]
	}
	switch os.Args[1] {
	case "hold":
		max := time.Hour
		if len(os.Args) == 4 && os.Args[2] == "--max" {
			max = duration(os.Args[3])
		}
		sig := make(chan os.Signal, 1)
		signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
		select {
		case <-sig:
		case <-time.After(max):
		}
	case "list":
		fmt.Println("hold\nlist\nexit\necho2\nflood\nsleep\nspawn\ncat\ngetenv")
	case "exit":
		os.Exit(atoi(arg(2)))
	case "echo2":
		fmt.Fprint(os.Stdout, arg(2))
		fmt.Fprint(os.Stderr, arg(3))
	case "flood":
		n := atoi(arg(2))
		chunk := bytes.Repeat([]byte("x"), 32<<10)
		for _, w := range []*os.File{os.Stdout, os.Stderr} {
			for left := n; left > 0; left -= len(chunk) {
				if _, err := w.Write(chunk[:min(left, len(chunk))]); err != nil {
					os.Exit(3)
				}
			}
		}
	case "sleep":
		time.Sleep(duration(arg(2)))
	case "spawn":
		self, err := os.Executable()
		if err != nil {
			fail(err.Error())
		}
		c := exec.Command(self, "sleep", arg(2))
		c.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
		if err := c.Start(); err != nil {
			fail(err.Error())
		}
		fmt.Println(c.Process.Pid)
	case "cat":
		f, err := os.Open(arg(2))
		if err != nil {
			fail(err.Error())
		}
		io.Copy(os.Stdout, io.LimitReader(f, 1<<20))
	case "getenv":
		v, ok := os.LookupEnv(arg(2))
		if !ok {
			os.Exit(1)
		}
		fmt.Print(v)
	default:
		fail("unknown command " + os.Args[1])
	}
}

func fail(msg string) {
	fmt.Fprintln(os.Stderr, "fakeprobe:", msg)
	os.Exit(2)
}

func atoi(s string) int {
	n, err := strconv.Atoi(s)
	if err != nil {
		fail(err.Error())
	}
	return n
}

func duration(s string) time.Duration {
	d, err := time.ParseDuration(s)
	if err != nil {
		fail(err.Error())
	}
	return d
}
