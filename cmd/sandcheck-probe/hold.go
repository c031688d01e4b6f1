package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"
)

// reapInterval backs up SIGCHLD, which coalesces and can be missed around
// the moment the handler is installed.
const reapInterval = 5 * time.Second

// hold is the sandbox's entrypoint: it idles as PID 1, reaps the zombies that
// are re-parented to it (orphans of probes run by exec), and exits 0 on
// SIGTERM or SIGINT, which PID 1 would otherwise ignore, or after --max so a
// forgotten sandbox does not live for ever.
func hold(args []string, stderr io.Writer) int {
	fs := flag.NewFlagSet("hold", flag.ContinueOnError)
	fs.SetOutput(stderr)
	max := fs.Duration("max", 30*time.Minute, "exit after this long")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() > 0 || *max <= 0 {
		fmt.Fprintln(stderr, "sandcheck-probe: usage: hold [--max 30m]")
		return 2
	}
	sigs := make(chan os.Signal, 16)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGCHLD)
	deadline := time.NewTimer(*max)
	tick := time.NewTicker(reapInterval)
	defer tick.Stop()
	for {
		reap()
		select {
		case s := <-sigs:
			if s != syscall.SIGCHLD {
				reap()
				return 0
			}
		case <-tick.C:
		case <-deadline.C:
			return 0
		}
	}
}

// reap collects every exited child without blocking.
func reap() {
	for {
		var ws syscall.WaitStatus
		pid, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil)
		if pid <= 0 || err != nil {
			return
		}
	}
}
