package engine

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sandcheck/sandcheck/evidence"
	"github.com/sandcheck/sandcheck/probes"
)

// The harness's other host-side canaries: a process on the host whose command
// line carries a token (found from inside only through the host's PID
// namespace), a honeyfile in the run's own folder (found from inside only
// through a path that leads to the host's root, such as /proc/1/root) and a
// read-only loop device over a small file in the run's folder (opened from
// inside only when the target hands host block devices to the sandbox).

// canaryProcLife bounds the canary process if the harness dies without
// stopping it (it is also killed with the harness: Pdeathsig).
const canaryProcLife = 30 * time.Minute

// canaryProc is a process on the host, the probe binary idling in hold mode,
// whose argv[0] is probes.CanaryProcPrefix followed by a token.
type canaryProc struct {
	token string
	cmd   *exec.Cmd
}

// startCanaryProc starts the canary process from the host's probe binary.
func startCanaryProc(probeBinary string) (*canaryProc, error) {
	b := make([]byte, 12)
	_, _ = rand.Read(b)
	c := &canaryProc{token: "proc-" + hex.EncodeToString(b)}
	c.cmd = &exec.Cmd{
		Path: probeBinary,
		Args: []string{probes.CanaryProcPrefix + c.token, "hold", "--max", canaryProcLife.String()},
		Env:  []string{},
		SysProcAttr: &syscall.SysProcAttr{
			Setpgid:   true,
			Pdeathsig: syscall.SIGKILL,
		},
	}
	if err := c.cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting the canary process: %w", err)
	}
	// Until exec completes, /proc shows the harness's own command line:
	// wait (bounded) until the canary shows its token, so that no sandbox
	// can look before it is there.
	want := []byte(probes.CanaryProcPrefix + c.token + "\x00")
	cmdline := filepath.Join("/proc", strconv.Itoa(c.cmd.Process.Pid), "cmdline")
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		if b, err := os.ReadFile(cmdline); err == nil && bytes.HasPrefix(b, want) {
			return c, nil
		}
		if time.Now().After(deadline) {
			c.stop(slog.New(slog.DiscardHandler))
			return nil, fmt.Errorf("the canary process %d did not show its token in %s within 5s", c.cmd.Process.Pid, cmdline)
		}
	}
}

// check says whether the tokens a probe reported (comma-separated: other
// runs on the host have canaries too) include this run's canary process.
func (c *canaryProc) check(reported string) (evidence.Item, bool) {
	if c == nil || reported == "" {
		return evidence.Item{}, false
	}
	if slices.Contains(strings.Split(reported, ","), c.token) {
		return evidence.Item{Source: evidence.SourceCanary, Kind: "canary-process", Indicates: probes.Escaped,
			Summary: fmt.Sprintf("the probe saw the canary process the harness runs on the host (host pid %d) and read its token", c.cmd.Process.Pid)}, true
	}
	return evidence.Item{Source: evidence.SourceCanary, Kind: "canary-process",
		Summary: "the probe reported canary-process tokens, none of them this run's canary"}, true
}

// stop ends the canary process (SIGTERM, which hold obeys, then SIGKILL) and
// reaps it.
func (c *canaryProc) stop(log *slog.Logger) {
	if c == nil || c.cmd.Process == nil {
		return
	}
	_ = c.cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan struct{})
	go func() {
		_ = c.cmd.Wait()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		_ = c.cmd.Process.Kill()
		<-done
		log.Warn("the canary process ignored SIGTERM and was killed", "pid", c.cmd.Process.Pid)
	}
}

// plantFile writes the honeyfile into folder dir (which the harness owns) and
// returns its path.
func (h *honey) plantFile(dir string) (string, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	p := filepath.Join(dir, h.name)
	if err := os.WriteFile(p, []byte(h.token+"\n"), 0o644); err != nil {
		return "", fmt.Errorf("planting the run folder's honeyfile: %w", err)
	}
	h.planted[p] = true
	return p, nil
}

// blockCanarySize is the size of the file behind the loop device.
const blockCanarySize = 64 << 10

// blockCanary is a read-only loop device over a small file in the run's
// folder. It is made with LO_FLAGS_AUTOCLEAR and the harness holds it open,
// so the kernel detaches it when the harness closes it or dies.
type blockCanary struct {
	path  string // /dev/loopN
	rdev  string // "7:N"
	loop  *os.File
	image string
}

// newBlockCanary attaches a loop device over a new file in runDir.
func newBlockCanary(runDir string) (*blockCanary, error) {
	image := filepath.Join(runDir, "block-canary.img")
	f, err := os.OpenFile(image, os.O_CREATE|os.O_EXCL|os.O_RDWR, 0o600)
	if err != nil {
		return nil, fmt.Errorf("creating the block canary's file: %w", err)
	}
	defer f.Close()
	if err := f.Truncate(blockCanarySize); err != nil {
		return nil, fmt.Errorf("sizing the block canary's file: %w", err)
	}
	ctl, err := os.OpenFile("/dev/loop-control", os.O_RDWR, 0)
	if err != nil {
		return nil, fmt.Errorf("opening /dev/loop-control: %w", err)
	}
	defer ctl.Close()
	var lastErr error
	// Another process may take the free device between the two calls.
	for range 3 {
		n, err := unix.IoctlRetInt(int(ctl.Fd()), unix.LOOP_CTL_GET_FREE)
		if err != nil {
			return nil, fmt.Errorf("finding a free loop device: %w", err)
		}
		path := fmt.Sprintf("/dev/loop%d", n)
		loop, err := os.OpenFile(path, os.O_RDONLY, 0)
		if err != nil {
			return nil, fmt.Errorf("opening %s: %w", path, err)
		}
		cfg := unix.LoopConfig{Fd: uint32(f.Fd())}
		cfg.Info.Flags = unix.LO_FLAGS_READ_ONLY | unix.LO_FLAGS_AUTOCLEAR
		copy(cfg.Info.File_name[:], "sandcheck-block-canary")
		if err := unix.IoctlLoopConfigure(int(loop.Fd()), &cfg); err != nil {
			loop.Close()
			lastErr = fmt.Errorf("attaching %s: %w", path, err)
			if errors.Is(err, unix.EBUSY) {
				continue
			}
			return nil, lastErr
		}
		var st unix.Stat_t
		if err := unix.Fstat(int(loop.Fd()), &st); err != nil {
			loop.Close()
			return nil, fmt.Errorf("stat %s: %w", path, err)
		}
		return &blockCanary{path: path, rdev: fmt.Sprintf("%d:%d", unix.Major(st.Rdev), unix.Minor(st.Rdev)),
			loop: loop, image: image}, nil
	}
	return nil, lastErr
}

// check says whether the device numbers a probe reported opening include the
// canary's.
func (b *blockCanary) check(reported []string) (evidence.Item, bool) {
	if b == nil {
		return evidence.Item{}, false
	}
	for _, r := range reported {
		if r == b.rdev {
			return evidence.Item{Source: evidence.SourceCanary, Kind: "block-canary", Indicates: probes.Escaped,
				Summary: fmt.Sprintf("the probe opened the harness's loop device %s (%s), a host block device", b.path, b.rdev)}, true
		}
	}
	return evidence.Item{Source: evidence.SourceCanary, Kind: "block-canary",
		Summary: fmt.Sprintf("the probe did not report opening the harness's loop device %s (%s)", b.path, b.rdev)}, true
}

// remove detaches the loop device (clearing it explicitly, autoclear backs
// this up) and deletes its file.
func (b *blockCanary) remove(log *slog.Logger) {
	if b == nil {
		return
	}
	if err := unix.IoctlSetInt(int(b.loop.Fd()), unix.LOOP_CLR_FD, 0); err != nil && !errors.Is(err, unix.ENXIO) {
		log.Warn("detaching the block canary", "device", b.path, "err", err)
	}
	b.loop.Close()
	if err := os.Remove(b.image); err != nil && !os.IsNotExist(err) {
		log.Warn("removing the block canary's file", "path", b.image, "err", err)
	}
}

// deliverSuidCanary puts a setuid-root copy of the probe binary into the
// probe folder (privilege.setuid-binaries runs it as a non-root user). The
// binary refuses every command but "child euid" while running setuid, and
// the run folder is the harness's own (mode 0700), so no host user reaches
// it. Without root the harness cannot make a setuid-root file: the probe then
// reports inconclusive.
func deliverSuidCanary(bin, probeDir string) error {
	if os.Geteuid() != 0 {
		return nil
	}
	src, err := os.Open(bin)
	if err != nil {
		return fmt.Errorf("setuid canary: %w", err)
	}
	defer src.Close()
	p := filepath.Join(probeDir, probes.SuidCanary)
	dst, err := os.OpenFile(p, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o500)
	if err != nil {
		return fmt.Errorf("setuid canary: %w", err)
	}
	if _, err := io.Copy(dst, src); err != nil {
		dst.Close()
		return fmt.Errorf("setuid canary: %w", err)
	}
	if err := dst.Close(); err != nil {
		return fmt.Errorf("setuid canary: %w", err)
	}
	if err := os.Chmod(p, os.ModeSetuid|0o755); err != nil {
		return fmt.Errorf("setuid canary: %w", err)
	}
	return nil
}
