// Package netns dials from inside a sandbox's network namespace: the host
// enters the namespace on one locked OS thread, opens its socket there (a
// socket belongs for life to the namespace it was made in) and returns to
// its own. What a sandbox's own code could reach over that path, the host
// can then check without trusting anything the box says.
//
// It is the one place that talks to the kernel about network namespaces.
package netns

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"runtime"
	"strconv"

	"golang.org/x/sys/unix"
)

// nsfsMagic is the file system type of namespace files (NSFS_MAGIC).
const nsfsMagic = 0x6e736673

// DialAsPID is Dial for a sandbox that names its first process's host pid
// through hostPID: the pid is looked up, and looked up again once the
// namespace file is held, so a pid that left the sandbox is refused.
func DialAsPID(ctx context.Context, hostPID func(context.Context) (int, error), d *net.Dialer, network, addr string) (net.Conn, error) {
	pid, err := hostPID(ctx)
	if err != nil {
		return nil, err
	}
	still := func(ctx context.Context) error {
		if now, err := hostPID(ctx); err != nil || now != pid {
			return fmt.Errorf("pid %d is no longer the sandbox's (now %d): %v", pid, now, err)
		}
		return nil
	}
	return Dial(ctx, pid, still, d, network, addr)
}

// Dial opens a connection to addr (an address literal and port) over
// network ("tcp", "tcp4", "tcp6", "udp", ...) with d (nil: a plain
// dialer) from inside the network namespace of the host process pid (see
// Do for still). ctx bounds the dial.
func Dial(ctx context.Context, pid int, still func(context.Context) error, d *net.Dialer, network, addr string) (net.Conn, error) {
	return dialWith(ctx, func(fn func() error) error { return Do(ctx, pid, still, fn) }, d, network, addr)
}

// DialFile is Dial from inside the network namespace the namespace file
// path holds (see DoFile).
func DialFile(ctx context.Context, path string, d *net.Dialer, network, addr string) (net.Conn, error) {
	return dialWith(ctx, func(fn func() error) error { return DoFile(ctx, path, fn) }, d, network, addr)
}

// DialHeld is Dial from inside the network namespace that ns, a namespace
// file the caller holds open (Pin, or the harness's own namespace file of
// a sandbox), names (see DoHeld).
func DialHeld(ctx context.Context, ns *os.File, d *net.Dialer, network, addr string) (net.Conn, error) {
	return dialWith(ctx, func(fn func() error) error { return DoHeld(ctx, ns, fn) }, d, network, addr)
}

// dialWith dials addr with d through do, which runs its function inside
// the namespace.
func dialWith(ctx context.Context, do func(func() error) error, d *net.Dialer, network, addr string) (net.Conn, error) {
	if d == nil {
		d = &net.Dialer{}
	}
	// An address literal only: a name would be resolved by whatever the
	// namespace's resolver is, and the dial must reach exactly addr.
	if _, err := netip.ParseAddrPort(addr); err != nil {
		return nil, fmt.Errorf("dialing %q from a sandbox's network namespace: not an address and port: %w", addr, err)
	}
	var c net.Conn
	err := do(func() error {
		var err error
		c, err = d.DialContext(ctx, network, addr)
		return err
	})
	if err != nil && c != nil {
		c.Close()
		c = nil
	}
	return c, err
}

// DoFile runs fn inside the network namespace the namespace file path
// holds: a runtime's own bind mount of the namespace it made for a
// sandbox (Docker's SandboxKey). A process's /proc/PID/ns/net names
// whatever namespace that process is in now, and code in a box that may
// make namespaces can move its first process into an empty one of its
// own before the host looks; the runtime's file keeps naming the
// sandbox's. path must be absolute and a namespace file.
func DoFile(ctx context.Context, path string, fn func() error) error {
	if !filepath.IsAbs(path) {
		return fmt.Errorf("entering the network namespace file %q: not an absolute path", path)
	}
	ns, err := openNS(path)
	if err != nil {
		return err
	}
	defer ns.Close()
	return DoHeld(ctx, ns, fn)
}

// Pin opens the network namespace file of the host process pid and checks
// it is one. Held open, it keeps naming that namespace whatever the
// process does later: a runner pins a sandbox's namespace while the
// sandbox's first process is still the runtime's own code (bwrap blocked
// on its --block-fd), before any code of the box runs, and dials through
// it with DialHeld. The caller closes the file.
func Pin(pid int) (*os.File, error) {
	if pid <= 0 {
		return nil, fmt.Errorf("pinning the network namespace of pid %d: no such process", pid)
	}
	return openNS("/proc/" + strconv.Itoa(pid) + "/ns/net")
}

// DoHeld runs fn inside the network namespace the open namespace file ns
// names (see Do for fn's rules). ns stays open.
func DoHeld(ctx context.Context, ns *os.File, fn func() error) error {
	if ns == nil {
		return errors.New("entering a sandbox's network namespace: no namespace file held")
	}
	var st unix.Statfs_t
	if err := unix.Fstatfs(int(ns.Fd()), &st); err != nil || st.Type != nsfsMagic {
		return fmt.Errorf("entering the network namespace held as %s: not a namespace file (%v)", ns.Name(), err)
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("entering the network namespace held as %s: %w", ns.Name(), err)
	}
	done := make(chan error, 1)
	go func() { done <- runIn(ns, fn) }()
	return <-done
}

// Do runs fn inside the network namespace of the host process pid, on an
// OS thread of its own; sockets fn makes belong to that namespace for
// life. The namespace file is opened by pid in the host's /proc, never
// through a path of the sandbox's own file system. still is called once the
// namespace file is held and must say whether pid is still the sandbox's (a
// pid that ended and was reused would name another namespace); an error
// from it ends Do before the namespace is entered. fn must not start
// goroutines of its own that make sockets.
func Do(ctx context.Context, pid int, still func(context.Context) error, fn func() error) error {
	if pid <= 0 {
		return fmt.Errorf("entering the network namespace of pid %d: no such process", pid)
	}
	ns, err := openNS("/proc/" + strconv.Itoa(pid) + "/ns/net")
	if err != nil {
		return err
	}
	defer ns.Close()
	if still != nil {
		if err := still(ctx); err != nil {
			return fmt.Errorf("entering the network namespace of pid %d: %w", pid, err)
		}
	}
	done := make(chan error, 1)
	go func() { done <- runIn(ns, fn) }()
	return <-done
}

// openNS opens a namespace file and checks that it is one.
func openNS(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("opening %s: %w", path, err)
	}
	var st unix.Statfs_t
	if err := unix.Fstatfs(int(f.Fd()), &st); err != nil {
		f.Close()
		return nil, fmt.Errorf("checking %s: %w", path, err)
	}
	if st.Type != nsfsMagic {
		f.Close()
		return nil, fmt.Errorf("checking %s: not a namespace file", path)
	}
	return f, nil
}

// runIn runs on a goroutine of its own, locked to its OS thread for as long
// as the thread is in the other namespace. If the thread cannot return to
// the host's namespace it stays locked, and the runtime ends it with the
// goroutine instead of handing it to other code.
func runIn(ns *os.File, fn func() error) error {
	runtime.LockOSThread()
	own, err := openNS("/proc/thread-self/ns/net")
	if err != nil {
		runtime.UnlockOSThread()
		return err
	}
	defer own.Close()
	if err := unix.Setns(int(ns.Fd()), unix.CLONE_NEWNET); err != nil {
		runtime.UnlockOSThread()
		return fmt.Errorf("entering the sandbox's network namespace: %w", err)
	}
	ferr := fn()
	if err := unix.Setns(int(own.Fd()), unix.CLONE_NEWNET); err != nil {
		// The thread is lost to the host: never unlocked, it dies with
		// this goroutine.
		return fmt.Errorf("returning to the host's network namespace (after %v): %w", ferr, err)
	}
	runtime.UnlockOSThread()
	return ferr
}
