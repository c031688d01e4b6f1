package netns

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// needRoot skips where the test cannot enter namespaces; CI runs as root.
func needRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("entering a network namespace needs root (CAP_SYS_ADMIN)")
	}
}

// freshNS starts a process in a network namespace of its own with only its
// loopback up, and returns its pid; the process is killed at cleanup.
func freshNS(t *testing.T) int {
	t.Helper()
	for _, tool := range []string{"unshare", "ip"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("making a test namespace needs %s: %v", tool, err)
		}
	}
	cmd := exec.Command("unshare", "--net", "sh", "-c", "ip link set lo up && echo up && exec sleep 60")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting a process in a new network namespace: %v", err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})
	buf := make([]byte, 3)
	if _, err := out.Read(buf); err != nil || string(buf) != "up\n" {
		t.Fatalf("the test namespace's loopback did not come up: %q %v", buf, err)
	}
	return cmd.Process.Pid
}

// listen opens a loopback listener in the test's own namespace.
func listen(t *testing.T) (net.Listener, string) {
	t.Helper()
	l, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	return l, l.Addr().String()
}

func ctx1s(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	t.Cleanup(cancel)
	return ctx
}

// The host's own namespace, entered by pid, reaches its own listener.
func TestDialOwnNamespaceConnects(t *testing.T) {
	needRoot(t)
	_, addr := listen(t)
	c, err := Dial(ctx1s(t), os.Getpid(), nil, nil, "tcp", addr)
	if err != nil {
		t.Fatalf("dialing %s from the test's own namespace: %v", addr, err)
	}
	c.Close()
}

// A fresh namespace does not reach the host's loopback listener (the dial
// fails as a dial, *net.OpError, refused), reaches one made inside it, and
// every thread comes back to the host's namespace.
func TestDialFreshNamespace(t *testing.T) {
	needRoot(t)
	pid := freshNS(t)
	_, hostAddr := listen(t)
	hostNS, err := os.Readlink("/proc/thread-self/ns/net")
	if err != nil {
		t.Fatal(err)
	}

	_, err = Dial(ctx1s(t), pid, nil, nil, "tcp", hostAddr)
	var oe *net.OpError
	if err == nil || !errors.As(err, &oe) {
		t.Fatalf("dial of the host's listener %s from a fresh namespace: want a dial error (*net.OpError), got %v", hostAddr, err)
	}
	if !strings.Contains(err.Error(), "refused") {
		t.Errorf("dial of %s from a namespace with no listener there: want refused, got %v", hostAddr, err)
	}

	var inside net.Listener
	if err := Do(ctx1s(t), pid, nil, func() error {
		var err error
		inside, err = net.Listen("tcp4", "127.0.0.1:0")
		return err
	}); err != nil {
		t.Fatalf("listening inside the test namespace: %v", err)
	}
	defer inside.Close()
	go func() {
		if c, err := inside.Accept(); err == nil {
			c.Close()
		}
	}()
	c, err := Dial(ctx1s(t), pid, nil, nil, "tcp", inside.Addr().String())
	if err != nil {
		t.Fatalf("dial of the namespace's own listener %s: %v", inside.Addr(), err)
	}
	c.Close()

	// The listener is the namespace's: the host does not reach it.
	if c, err := net.DialTimeout("tcp", inside.Addr().String(), time.Second); err == nil {
		c.Close()
		t.Errorf("the host reached %s, a listener made inside the test namespace", inside.Addr())
	}
	for i := range 20 {
		done := make(chan string, 1)
		go func() {
			ns, _ := os.Readlink("/proc/thread-self/ns/net")
			done <- ns
		}()
		if ns := <-done; ns != hostNS {
			t.Fatalf("thread %d is in %s after the dials, want the host's %s", i, ns, hostNS)
		}
	}
}

// A pid that is no longer the sandbox's ends the dial before the namespace
// is entered; a name (not an address literal) is never dialled.
func TestDialRefusesStalePidAndNames(t *testing.T) {
	needRoot(t)
	_, addr := listen(t)
	stale := errors.New("init changed")
	if _, err := Dial(ctx1s(t), os.Getpid(), func(context.Context) error { return stale }, nil, "tcp", addr); !errors.Is(err, stale) {
		t.Errorf("dial with a stale pid: want %v, got %v", stale, err)
	}
	_, port, _ := net.SplitHostPort(addr)
	if _, err := Dial(ctx1s(t), os.Getpid(), nil, nil, "tcp", "localhost:"+port); err == nil {
		t.Error("a host name was dialled; want an address literal only")
	}
	if _, err := Dial(ctx1s(t), 0, nil, nil, "tcp", addr); err == nil {
		t.Error("pid 0 was entered")
	}
	if _, err := Dial(ctx1s(t), 1<<30, nil, nil, "tcp", addr); err == nil || !strings.Contains(err.Error(), "/proc/"+strconv.Itoa(1<<30)) {
		t.Errorf("a pid that does not exist: want an error naming its ns file, got %v", err)
	}
}

// A runtime's namespace file (here a bind mount of a test namespace, as
// Docker's SandboxKey is) names the namespace after its process has gone:
// DoFile enters it and DialFile reaches a listener made inside it, while
// the pid names nothing. A path that is not absolute, or a file that is no
// namespace, is refused before anything is entered.
func TestDoFileHoldsTheRuntimesNamespace(t *testing.T) {
	needRoot(t)
	pid := freshNS(t)
	file := filepath.Join(t.TempDir(), "netns")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mount(fmt.Sprintf("/proc/%d/ns/net", pid), file, "", unix.MS_BIND, ""); err != nil {
		t.Fatalf("bind-mounting the test namespace: %v", err)
	}
	t.Cleanup(func() { unix.Unmount(file, unix.MNT_DETACH) })
	p, err := os.FindProcess(pid)
	if err != nil {
		t.Fatal(err)
	}
	p.Kill()
	for range 100 { // bounded: 100 × 20 ms
		if _, err := os.Stat(fmt.Sprintf("/proc/%d/ns/net", pid)); err != nil {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if _, err := Dial(ctx1s(t), pid, nil, nil, "tcp", "127.0.0.1:9"); err == nil {
		t.Fatalf("pid %d ended, but a dial by it went through", pid)
	}
	var inside net.Listener
	if err := DoFile(ctx1s(t), file, func() error {
		var err error
		inside, err = net.Listen("tcp4", "127.0.0.1:0")
		return err
	}); err != nil {
		t.Fatalf("listening inside the namespace file's namespace: %v", err)
	}
	defer inside.Close()
	go func() {
		if c, err := inside.Accept(); err == nil {
			c.Close()
		}
	}()
	c, err := DialFile(ctx1s(t), file, nil, "tcp", inside.Addr().String())
	if err != nil {
		t.Fatalf("dial of the namespace's own listener %s through %s: %v", inside.Addr(), file, err)
	}
	c.Close()
	if c, err := net.DialTimeout("tcp", inside.Addr().String(), time.Second); err == nil {
		c.Close()
		t.Errorf("the host reached %s, a listener made inside the namespace file's namespace", inside.Addr())
	}
	plain := filepath.Join(t.TempDir(), "plain")
	if err := os.WriteFile(plain, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for path, want := range map[string]string{plain: "not a namespace file", "netns": "not an absolute path"} {
		if err := DoFile(ctx1s(t), path, func() error { return nil }); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("DoFile(%q): %v, want an error saying %q", path, err, want)
		}
	}
}

// TestPinKeepsTheNamespaceTheProcessLeaves: a namespace pinned while its
// process was still in it stays the one entered after the process moved
// itself into a fresh namespace (as code in a box that may make namespaces
// can), while entering by pid follows the process.
func TestPinKeepsTheNamespaceTheProcessLeaves(t *testing.T) {
	needRoot(t)
	for _, tool := range []string{"unshare", "ip"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("making a test namespace needs %s: %v", tool, err)
		}
	}
	cmd := exec.Command("unshare", "--net", "sh", "-c", "ip link set lo up && echo up && read go && exec unshare --net sh -c 'echo moved && exec sleep 60'")
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting a process in a new network namespace: %v", err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})
	line := func(want string) {
		t.Helper()
		buf := make([]byte, len(want)+1)
		if _, err := io.ReadFull(out, buf); err != nil || string(buf) != want+"\n" {
			t.Fatalf("the test process said %q (%v), want %q", buf, err, want)
		}
	}
	line("up")
	pid := cmd.Process.Pid
	pinned, err := Pin(pid)
	if err != nil {
		t.Fatalf("Pin(%d): %v", pid, err)
	}
	defer pinned.Close()
	var inside net.Listener
	if err := DoHeld(ctx1s(t), pinned, func() error {
		var err error
		inside, err = net.Listen("tcp4", "127.0.0.1:0")
		return err
	}); err != nil {
		t.Fatalf("listening inside the pinned namespace: %v", err)
	}
	defer inside.Close()
	go func() {
		for {
			c, err := inside.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	io.WriteString(in, "go\n")
	line("moved")
	var was, now unix.Stat_t
	if err := unix.Fstat(int(pinned.Fd()), &was); err != nil {
		t.Fatal(err)
	}
	if err := unix.Stat(fmt.Sprintf("/proc/%d/ns/net", pid), &now); err != nil {
		t.Fatal(err)
	}
	if was.Ino == now.Ino {
		t.Fatalf("the test process did not leave its namespace (inode %d)", now.Ino)
	}
	c, err := DialHeld(ctx1s(t), pinned, nil, "tcp", inside.Addr().String())
	if err != nil {
		t.Fatalf("dial of the pinned namespace's listener %s: %v", inside.Addr(), err)
	}
	c.Close()
	if c, err := Dial(ctx1s(t), pid, nil, nil, "tcp", inside.Addr().String()); err == nil {
		c.Close()
		t.Errorf("a dial by pid %d reached %s after the process left that namespace", pid, inside.Addr())
	}
	plain, err := os.Open(os.DevNull)
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	if err := DoHeld(ctx1s(t), plain, func() error { return nil }); err == nil || !strings.Contains(err.Error(), "not a namespace file") {
		t.Errorf("DoHeld(%s): %v, want an error saying it is not a namespace file", os.DevNull, err)
	}
	if _, err := Pin(0); err == nil {
		t.Error("Pin(0) held something")
	}
}
