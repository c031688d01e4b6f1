//go:build linux && amd64

package tracer

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"github.com/cilium/ebpf/ringbuf"
	"github.com/cilium/ebpf/rlimit"
	"golang.org/x/sys/unix"
)

// ErrUnavailable means tracing cannot work here (no root, no BTF, a kernel
// without the tracepoints): a conclusive "not here", unlike other errors.
var ErrUnavailable = errors.New("tracer unavailable")

// DefaultSensitivePrefixes are the path prefixes whose opens become events
// unless Options say otherwise.
var DefaultSensitivePrefixes = []string{
	"/etc/shadow", "/etc/sudoers", "/root/", "/proc/kcore", "/proc/sysrq-trigger",
	"/proc/sys/kernel/", "/proc/1/root", "/sys/kernel/", "/sys/fs/cgroup/",
	"/var/run/docker.sock", "/run/docker.sock", "/run/containerd/", "/dev/mem", "/dev/kmsg",
	"/var/run/secrets/", "/home/",
}

// argSyscalls are the syscalls whose calls become events with their
// arguments: opens (kept only when the path has a sensitive prefix),
// connections and sends with a destination, and the calls that change
// identity, namespaces, mounts or the kernel, and those that install a
// seccomp filter (seccomp, and prctl whose option says which): a box that
// filters itself must not pass off its own refusals as the sandbox's. All are
// below argSyscallMax.
var argSyscalls = []int{
	unix.SYS_SECCOMP, unix.SYS_PRCTL,
	unix.SYS_OPEN, unix.SYS_OPENAT, unix.SYS_OPENAT2,
	unix.SYS_CONNECT, unix.SYS_SENDTO, unix.SYS_SENDMSG,
	unix.SYS_PTRACE,
	unix.SYS_SETUID, unix.SYS_SETGID, unix.SYS_SETREUID, unix.SYS_SETREGID,
	unix.SYS_SETRESUID, unix.SYS_SETRESGID, unix.SYS_SETFSUID, unix.SYS_SETFSGID,
	unix.SYS_PIVOT_ROOT, unix.SYS_MOUNT, unix.SYS_UMOUNT2,
	unix.SYS_OPEN_TREE, unix.SYS_MOVE_MOUNT, unix.SYS_FSOPEN, unix.SYS_FSMOUNT,
	unix.SYS_INIT_MODULE, unix.SYS_FINIT_MODULE, unix.SYS_DELETE_MODULE,
	unix.SYS_KEXEC_LOAD, unix.SYS_KEXEC_FILE_LOAD,
	unix.SYS_UNSHARE, unix.SYS_SETNS, unix.SYS_BPF,
}

// argSyscallBits is argSyscalls as the kernel side's bitmap.
func argSyscallBits() ([argSyscallMax / 64]uint64, error) {
	var bits [argSyscallMax / 64]uint64
	for _, nr := range argSyscalls {
		if nr < 0 || nr >= argSyscallMax {
			return bits, fmt.Errorf("syscall %d is past the %d the kernel side can flag", nr, argSyscallMax)
		}
		bits[nr/64] |= 1 << (nr % 64)
	}
	return bits, nil
}

// Options configure a Tracer.
type Options struct {
	// Logger receives the tracer's logs; nil discards.
	Logger *slog.Logger
	// SensitivePrefixes are absolute path prefixes whose opens (open, and
	// openat and openat2 from the working directory) become events; nil
	// means DefaultSensitivePrefixes. At most 16, each under 64 bytes.
	// Relative paths are not matched, and an openat or openat2 from a
	// directory descriptor is not read at all: reading a path from the
	// workload's memory is most of what an open costs the tracer, and a walk
	// through a tree opens each file that way.
	SensitivePrefixes []string
	// MaxEvents bounds the events kept per watch (default 4096); more are
	// counted in Lost.Capped.
	MaxEvents int
}

// Tracer is the loaded and attached BPF programs. Close unloads them.
type Tracer struct {
	log     *slog.Logger
	objs    tracerObjects
	links   []link.Link
	rd      *ringbuf.Reader
	max     int
	done    chan struct{}
	flushed chan struct{}
	syncMu  sync.Mutex
	genMu   sync.Mutex
	ugen    uint32 // user space's share of the membership generation

	mu      sync.Mutex
	watches map[uint32]*Watch
	seen    uint64 // ring-buffer events decoded
	trees   uint32 // WatchTrees' watches so far (their keys)
	closed  bool
}

// New loads the BPF programs, attaches them and starts reading events.
// Failures that mean "not on this machine" wrap ErrUnavailable.
func New(opts Options) (_ *Tracer, err error) {
	if os.Geteuid() != 0 {
		return nil, fmt.Errorf("%w: needs root (CAP_BPF and CAP_PERFMON)", ErrUnavailable)
	}
	if _, err := os.Stat("/sys/kernel/btf/vmlinux"); err != nil {
		return nil, fmt.Errorf("%w: the kernel has no BTF (/sys/kernel/btf/vmlinux)", ErrUnavailable)
	}
	prefixes := opts.SensitivePrefixes
	if prefixes == nil {
		prefixes = DefaultSensitivePrefixes
	}
	if len(prefixes) > 16 {
		return nil, fmt.Errorf("configuring the tracer: %d sensitive prefixes, at most 16", len(prefixes))
	}
	if err := rlimit.RemoveMemlock(); err != nil {
		return nil, fmt.Errorf("%w: lifting the memlock limit: %v", ErrUnavailable, err)
	}
	t := &Tracer{log: opts.Logger, max: opts.MaxEvents, done: make(chan struct{}),
		flushed: make(chan struct{}, 1), watches: map[uint32]*Watch{}}
	if t.log == nil {
		t.log = slog.New(slog.DiscardHandler)
	}
	if t.max <= 0 {
		t.max = 4096
	}
	spec, err := loadTracer()
	if err != nil {
		return nil, fmt.Errorf("reading the BPF object: %w", err)
	}
	bits, err := argSyscallBits()
	if err != nil {
		return nil, err
	}
	if err := spec.LoadAndAssign(&t.objs, nil); err != nil {
		var ve *ebpf.VerifierError
		if errors.As(err, &ve) {
			return nil, fmt.Errorf("loading the BPF programs: %w", err)
		}
		return nil, fmt.Errorf("%w: loading the BPF programs: %v", ErrUnavailable, err)
	}
	defer func() {
		if err != nil {
			t.Close()
		}
	}()
	if err := t.objs.ArgBits.Set(bits); err != nil {
		return nil, fmt.Errorf("configuring the tracer: %w", err)
	}
	var g tracerConfig
	for i := range g.Prefixes {
		g.Prefixes[i].Head = 1 // unused: never matches
	}
	for i, p := range prefixes {
		v := &g.Prefixes[i]
		if len(p) >= len(v.S) || !strings.HasPrefix(p, "/") {
			return nil, fmt.Errorf("configuring the tracer: sensitive prefix %q is not an absolute path under %d bytes", p, len(v.S))
		}
		v.Len = uint32(len(p))
		v.Head, v.Mask = 0, 0
		for j := range len(p) {
			v.S[j] = int8(p[j])
			if j < 8 {
				v.Head |= uint64(p[j]) << (8 * j)
				v.Mask |= 0xff << (8 * j)
			}
		}
	}
	if err := t.objs.Cfg.Set(g); err != nil {
		return nil, fmt.Errorf("configuring the tracer: %w", err)
	}
	for slot := range uint32(maxSlots) {
		if err := t.objs.FreeSlots.Put(nil, slot); err != nil {
			return nil, fmt.Errorf("configuring the tracer: freeing slot %d: %w", slot, err)
		}
	}
	if err := t.attach(); err != nil {
		return nil, err
	}
	if t.rd, err = ringbuf.NewReader(t.objs.Events); err != nil {
		return nil, fmt.Errorf("opening the ring buffer: %w", err)
	}
	go t.read()
	return t, nil
}

// tracepoints are the BTF raw tracepoints the tracer attaches to, which a
// program measuring the kernel's own price for being there attaches to as
// well (bench_test.go).
var tracepoints = []string{"sys_exit", "sched_process_exec", "sched_process_fork", "sched_process_exit"}

// attach attaches each program to its tracepoint.
func (t *Tracer) attach() error {
	progs := map[string]*ebpf.Program{
		"sys_exit":           t.objs.ScSysExit,
		"sched_process_exec": t.objs.ScExec,
		"sched_process_fork": t.objs.ScFork,
		"sched_process_exit": t.objs.ScExit,
	}
	for _, name := range tracepoints {
		prog := progs[name]
		if prog == nil {
			return fmt.Errorf("attaching BTF raw tracepoint %s: no program for it", name)
		}
		l, err := link.AttachTracing(link.TracingOptions{Program: prog})
		if err != nil {
			return fmt.Errorf("%w: attaching BTF raw tracepoint %s: %v", ErrUnavailable, name, err)
		}
		t.links = append(t.links, l)
	}
	return nil
}

// Close detaches and unloads everything; safe twice.
func (t *Tracer) Close() error {
	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		return nil
	}
	t.closed = true
	t.mu.Unlock()
	var errs []error
	if t.rd != nil {
		errs = append(errs, t.rd.Close())
		<-t.done
	}
	for _, l := range t.links {
		errs = append(errs, l.Close())
	}
	errs = append(errs, t.objs.Close())
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("closing the tracer: %w", err)
	}
	return nil
}

// read decodes ring-buffer records until the reader closes.
func (t *Tracer) read() {
	defer close(t.done)
	var rec ringbuf.Record
	for {
		err := t.rd.ReadInto(&rec)
		switch {
		case errors.Is(err, ringbuf.ErrClosed):
			return
		case errors.Is(err, ringbuf.ErrFlushed):
			select {
			case t.flushed <- struct{}{}:
			default:
			}
			continue
		case err != nil:
			t.log.Warn("tracer: reading the ring buffer", "err", err)
			continue
		}
		ns, ev, err := decode(rec.RawSample)
		if err != nil {
			t.log.Warn("tracer: decoding an event", "err", err)
			continue
		}
		t.mu.Lock()
		t.seen++
		if w := t.watches[ns]; w != nil {
			w.add(ev)
		}
		t.mu.Unlock()
	}
}

// sync waits until every event already in the ring buffer has been decoded.
func (t *Tracer) sync() {
	t.syncMu.Lock()
	defer t.syncMu.Unlock()
	select {
	case <-t.flushed:
	default:
	}
	if err := t.rd.Flush(); err != nil {
		t.log.Warn("tracer: flushing the ring buffer", "err", err)
		return
	}
	select {
	case <-t.flushed:
	case <-time.After(2 * time.Second):
		t.log.Warn("tracer: the ring buffer did not drain within 2s")
	}
}

// bumpGeneration invalidates every CPU's cache of task membership: called
// after user space changes membership (seeding marks, disowning slots). It
// bumps user space's own share of the generation (ugen), which nothing else
// writes.
func (t *Tracer) bumpGeneration() error {
	t.genMu.Lock()
	defer t.genMu.Unlock()
	t.ugen++
	if err := t.objs.Ugen.Set(t.ugen); err != nil {
		return fmt.Errorf("bumping the membership generation: %w", err)
	}
	return nil
}

// Lost returns the kernel-wide loss counters since the tracer loaded.
func (t *Tracer) Lost() (Lost, error) {
	var l Lost
	for idx, dst := range map[uint32]*uint64{0: &l.Events, 1: &l.Tasks, 2: &l.Counts} {
		var per []uint64
		if err := t.objs.Stats.Lookup(idx, &per); err != nil {
			return l, fmt.Errorf("reading loss counters: %w", err)
		}
		for _, v := range per {
			*dst += v
		}
	}
	t.mu.Lock()
	for _, w := range t.watches {
		l.Capped += w.capped
	}
	t.mu.Unlock()
	return l, nil
}

// Events returns how many ring-buffer events the tracer has decoded.
func (t *Tracer) Events() uint64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.seen
}
