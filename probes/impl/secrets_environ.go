package impl

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sandcheck/sandcheck/probes"
)

// Bounds of the /proc/*/environ scan.
const (
	environMaxPIDs   = 1024  // processes of the box itself read
	environMaxListed = 32768 // /proc entries looked at
	environReadMax   = 64 << 10
	environPoll      = 100 * time.Millisecond
	environWaitMax   = 3 * time.Second // for a process to test against to appear
	environMaxFound  = 16
)

func init() {
	register(map[string]Func{"secrets.proc-environ": procEnviron})
}

// procEnviron reads the environment of every other process in the box
// (/proc/PID/environ) and looks for secret-shaped values, as code would that
// hunts a platform agent's or supervisor's key. The kernel lets a process
// read another's environment only where it may ptrace it (same user without
// a privilege change, or CAP_SYS_PTRACE), so a refusal is the block. With no
// other process to test against yet (the harness starts its holder beside
// the probe), it looks again for a few seconds; a box where no other process
// ever appears has no environment to steal, which is blocked too.
func procEnviron(ctx context.Context, p probes.Params) probes.Result {
	deadline := time.Now().Add(environWaitMax)
	var s environScan
	for {
		s = scanEnvirons(ctx, os.Getpid())
		if len(s.found) > 0 || s.denied > 0 || time.Now().After(deadline) || ctx.Err() != nil {
			break
		}
		select {
		case <-ctx.Done():
		case <-time.After(environPoll):
		}
	}
	e := ev{}
	e.setInt("processes", s.procs)
	e.setInt("environ_readable", s.readable)
	e.setInt("environ_denied", s.denied)
	if s.otherNS > 0 {
		e.setInt("other_namespace_skipped", s.otherNS)
	}
	if len(s.deniedErr) > 0 {
		e.setList("denied", s.deniedErr)
	}
	if len(s.found) > 0 {
		var items, proofs []string
		seen := map[string]bool{}
		for _, f := range s.found {
			items = append(items, f.where)
			if !seen[f.value] && len(proofs) < environMaxFound {
				seen[f.value] = true
				proofs = append(proofs, proof(p.Token, f.value))
			}
		}
		e.setList("findings", items)
		e.set("proofs", strings.Join(proofs, " "))
		return escaped(fmt.Sprintf("read %d secret-shaped value(s) in other processes' environments (%s)", len(s.found), s.found[0].where), e)
	}
	switch {
	case s.denied > 0:
		return blocked(fmt.Sprintf("the environment of %d other process(es) was refused; the %d readable held no secret", s.denied, s.readable), e)
	case s.readable > 0:
		return inconclusive("every other process's environment was readable but none held a secret, and no process ran whose environment should have been refused", e)
	}
	return blocked(fmt.Sprintf("no other process appeared in the box within %s: no environment to read", environWaitMax), e)
}

type environFinding struct{ where, value string }

type environScan struct {
	procs, readable, denied int
	otherNS                 int // processes outside the box's namespaces, skipped
	deniedErr               []string
	found                   []environFinding
}

// scanEnvirons reads every other process's environment once.
func scanEnvirons(ctx context.Context, self int) environScan {
	var s environScan
	d, err := os.Open("/proc")
	if err != nil {
		return s
	}
	names, _ := d.Readdirnames(environMaxListed)
	d.Close()
	var pids []int
	for _, n := range names {
		if pid, err := strconv.Atoi(n); err == nil && pid != self {
			pids = append(pids, pid)
		}
	}
	sort.Ints(pids)
	box := ownBox()
	read := 0
	for _, pid := range pids {
		if ctx.Err() != nil || read >= environMaxPIDs {
			break
		}
		// A process of another box or of the host (a shared PID namespace)
		// is not this probe's to read: host.pid-namespace reports the
		// sharing. Where the link is refused, so is the environment.
		if !box.holds(pid) {
			s.otherNS++
			continue
		}
		read++
		b, err := readProcFile(fmt.Sprintf("/proc/%d/environ", pid))
		if err != nil {
			if errors.Is(err, unix.EACCES) || errors.Is(err, unix.EPERM) {
				s.procs++
				s.denied++
				if len(s.deniedErr) < 8 {
					n, _ := errnoOf(err)
					s.deniedErr = append(s.deniedErr, fmt.Sprintf("%d:%s", pid, errnoLabel(n)))
				}
			}
			continue // gone, or a kernel thread
		}
		s.procs++
		s.readable++
		for _, kv := range strings.Split(string(b), "\x00") {
			name, val, ok := strings.Cut(kv, "=")
			if !ok || val == "" {
				continue
			}
			if pat := secretPattern(name, val); pat != "" && len(s.found) < 64 {
				s.found = append(s.found, environFinding{where: fmt.Sprintf("%d:%s:%s", pid, clip(name, 64), pat), value: val})
			}
		}
	}
	return s
}

// readProcFile reads at most environReadMax bytes of a /proc file.
func readProcFile(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(io.LimitReader(f, environReadMax))
}

// environBox tells the box's own processes from others a shared PID
// namespace shows: those of its mount namespace, and those of its network
// namespace (a pod's containers, an ephemeral one beside the task included,
// each have a mount namespace of their own but share the pod's network
// namespace) unless that is the host's.
type environBox struct {
	mnt, net string // the probe's namespaces ("" when unreadable)
}

// ownBox reads the probe's namespaces. The network namespace does not mark
// the box when process 1 of the PID namespace, in another mount namespace,
// shares it: the box is on the host's network (or a pod's pause process is
// process 1), where it would take in the host's or every container's
// processes; the mount namespace alone decides then.
func ownBox() environBox {
	b := environBox{}
	b.mnt, _ = os.Readlink("/proc/self/ns/mnt")
	b.net, _ = os.Readlink("/proc/self/ns/net")
	mnt1, _ := os.Readlink("/proc/1/ns/mnt")
	net1, _ := os.Readlink("/proc/1/ns/net")
	if net1 == "" || (net1 == b.net && mnt1 != b.mnt) {
		b.net = ""
	}
	return b
}

// holds says whether pid is the box's to read. A process whose namespace
// links are refused is read (its environment will be refused too: the
// block).
func (b environBox) holds(pid int) bool {
	mnt, err := os.Readlink(fmt.Sprintf("/proc/%d/ns/mnt", pid))
	if err != nil || b.mnt == "" || mnt == b.mnt {
		return true
	}
	if b.net == "" {
		return false
	}
	net, err := os.Readlink(fmt.Sprintf("/proc/%d/ns/net", pid))
	return err == nil && net == b.net
}
