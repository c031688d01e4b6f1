// Command fakeprobe stands in for sandcheck-probe in the docker runner's
// tests: it implements only what the runner relies on (hold, list) and a few
// helpers the tests use to exercise Exec.
//
//	hold --max D   sleep until SIGTERM/SIGINT or D; exits at once with code
//	               $FAKEPROBE_HOLD_EXIT when that is set (a broken sandbox)
//	list           print the commands; fails with code $FAKEPROBE_LIST_EXIT
//	               when that is set (a probe that never answers)
//	flood N        write N bytes to stdout and N to stderr
//	exit N         exit with code N
package main

import (
	"bytes"
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"time"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: sandcheck-probe hold|list|flood|exit")
		os.Exit(2)
	}
	switch os.Args[1] {
	case "hold":
		if c := os.Getenv("FAKEPROBE_HOLD_EXIT"); c != "" {
			fmt.Fprintln(os.Stderr, "fakeprobe: exiting at once as told")
			os.Exit(atoi(c))
		}
		max := time.Hour
		if len(os.Args) == 4 && os.Args[2] == "--max" {
			d, err := time.ParseDuration(os.Args[3])
			if err != nil {
				fmt.Fprintln(os.Stderr, err)
				os.Exit(2)
			}
			max = d
		}
		sig := make(chan os.Signal, 1)
		signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
		select {
		case <-sig:
		case <-time.After(max):
		}
	case "list":
		if c := os.Getenv("FAKEPROBE_LIST_EXIT"); c != "" {
			fmt.Fprintln(os.Stderr, "fakeprobe: list fails as told")
			os.Exit(atoi(c))
		}
		fmt.Println("hold\nlist\nflood\nexit")
	case "flood":
		n := atoi(os.Args[2])
		chunk := bytes.Repeat([]byte("x"), 32<<10)
		for _, w := range []*os.File{os.Stdout, os.Stderr} {
			for left := n; left > 0; left -= len(chunk) {
				w.Write(chunk[:min(left, len(chunk))])
			}
		}
	case "exit":
		os.Exit(atoi(os.Args[2]))
	default:
		fmt.Fprintln(os.Stderr, "unknown command", os.Args[1])
		os.Exit(2)
	}
}

func atoi(s string) int {
	n, err := strconv.Atoi(s)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	return n
}
