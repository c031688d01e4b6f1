package main

import (
	"bytes"
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

// maxLease bounds how much of the lease file hold reads.
const maxLease = 128

// hold is the sandbox's entrypoint: it idles as PID 1, reaps the zombies that
// are re-parented to it (orphans of probes run by exec), and exits 0 on
// SIGTERM or SIGINT, which PID 1 would otherwise ignore, or after --max so a
// forgotten sandbox does not live for ever. With --lease it also exits once
// the lease file's content has not changed for --lease-ttl (the harness that
// made the sandbox rewrites it while it lives: internal/lease), and --max
// may then be 0, no bound but the lease's: a live run keeps its sandbox.
func hold(args []string, stderr io.Writer) int {
	fs := flag.NewFlagSet("hold", flag.ContinueOnError)
	fs.SetOutput(stderr)
	maxLife := fs.Duration("max", 30*time.Minute, "exit after this long (0: no bound but the lease's)")
	leasePath := fs.String("lease", "", "exit once this file's content has not changed for --lease-ttl")
	ttl := fs.Duration("lease-ttl", 3*time.Minute, "how long the lease may go unchanged")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() > 0 || *maxLife < 0 || (*maxLife == 0 && *leasePath == "") || *ttl <= 0 {
		fmt.Fprintln(stderr, "sandcheck-probe: usage: hold [--max 30m] [--lease FILE [--lease-ttl 3m]]")
		return 2
	}
	sigs := make(chan os.Signal, 16)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGCHLD)
	var deadline <-chan time.Time
	if *maxLife > 0 {
		deadline = time.After(*maxLife)
	}
	every := reapInterval
	if *leasePath != "" {
		every = min(every, max(*ttl/4, 10*time.Millisecond))
	}
	tick := time.NewTicker(every)
	defer tick.Stop()
	// The lease counts from the start: a lease file missing from the
	// first look on ends the holder after ttl, as one that stopped would.
	lastLease, changed := readLease(*leasePath), time.Now()
	for {
		reap()
		select {
		case s := <-sigs:
			if s != syscall.SIGCHLD {
				reap()
				return 0
			}
		case <-tick.C:
		case <-deadline:
			return 0
		}
		if *leasePath == "" {
			continue
		}
		if b := readLease(*leasePath); !bytes.Equal(b, lastLease) {
			lastLease, changed = b, time.Now()
		} else if time.Since(changed) >= *ttl {
			fmt.Fprintf(stderr, "sandcheck-probe: hold: the lease %s did not change for %s: the run that made this sandbox is gone\n", *leasePath, *ttl)
			return 0
		}
	}
}

// readLease is the lease file's content (at most maxLease bytes), nil when
// it cannot be read.
func readLease(path string) []byte {
	if path == "" {
		return nil
	}
	f, err := os.Open(path)
	if err != nil {
		return nil
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxLease))
	if err != nil {
		return nil
	}
	return b
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
