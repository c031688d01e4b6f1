package tracer

import (
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strings"

	"github.com/elastic/go-seccomp-bpf/arch"
	"golang.org/x/sys/unix"
)

// Count is what the kernel saw of one syscall: how often it returned, and
// how. EPERM, EACCES and ENOSYS are the usual answers of seccomp, an LSM or a
// missing capability: the call was refused before its kernel code ran.
type Count struct {
	Calls    uint64 `json:"calls"`
	OK       uint64 `json:"ok"`
	EPERM    uint64 `json:"eperm,omitempty"`
	EACCES   uint64 `json:"eacces,omitempty"`
	ENOSYS   uint64 `json:"enosys,omitempty"`
	OtherErr uint64 `json:"other_errors,omitempty"`
}

// Denied is how many calls were refused (EPERM, EACCES or ENOSYS).
func (c Count) Denied() uint64 { return c.EPERM + c.EACCES + c.ENOSYS }

// Reached is how many calls reached the syscall's own code: they succeeded
// or failed with an error other than a refusal.
func (c Count) Reached() uint64 { return c.OK + c.OtherErr }

func (c *Count) add(o Count) {
	c.Calls += o.Calls
	c.OK += o.OK
	c.EPERM += o.EPERM
	c.EACCES += o.EACCES
	c.ENOSYS += o.ENOSYS
	c.OtherErr += o.OtherErr
}

// Lost counts what the kernel side could not record. All zero means the
// report is complete.
type Lost struct {
	// Events is events the ring buffer had no room for.
	Events uint64 `json:"events"`
	// Tasks is processes that went unattributed because the task map was full.
	Tasks uint64 `json:"tasks"`
	// Counts is syscalls that went uncounted because the count map was full.
	Counts uint64 `json:"counts"`
	// Capped is events the kernel delivered but the report did not keep
	// (past Options.MaxEvents for one watch).
	Capped uint64 `json:"capped"`
}

// Any reports whether anything was lost.
func (l Lost) Any() bool { return l.Events+l.Tasks+l.Counts+l.Capped > 0 }

func (l Lost) add(o Lost) Lost {
	return Lost{Events: l.Events + o.Events, Tasks: l.Tasks + o.Tasks, Counts: l.Counts + o.Counts, Capped: l.Capped + o.Capped}
}

func (l Lost) sub(o Lost) Lost {
	return Lost{Events: l.Events - o.Events, Tasks: l.Tasks - o.Tasks, Counts: l.Counts - o.Counts, Capped: l.Capped - o.Capped}
}

// Tree is one process tree in a sandbox: the process that entered it (by
// exec'ing inside it) and everything it forked.
type Tree struct {
	// Root is the host tgid of the process that entered (for a held
	// command's tree, Held, a key of its own).
	Root uint32 `json:"root"`
	// Held is set for the tree of a held command's root (Watch.AddTree):
	// the processes that started the command, a wrapper's, not those of a
	// root file's exec below them.
	Held bool `json:"held,omitempty"`
	// Exe and Argv are the root's first exec inside the sandbox (argv capped
	// at 256 bytes); empty for processes already running when the watch
	// began, whose /proc/PID/cmdline is used instead where it was readable.
	Exe  string   `json:"exe,omitempty"`
	Argv []string `json:"argv,omitempty"`
	// Syscalls are the tree's syscalls by name.
	Syscalls map[string]Count `json:"syscalls"`
	// Events are the tree's exec, fork, exit and interesting syscall events,
	// in the order the kernel emitted them. A syscall event is the first
	// call of its kind (same syscall, result and key argument); its Calls
	// counts the later ones too.
	Events []Event `json:"events,omitempty"`
	// Unitemized counts, by syscall, the interesting calls the kernel
	// counted without an event here: kinds first seen after the tree had
	// streamed its budget of 1024 syscall events, or whose event was lost.
	Unitemized map[string]uint64 `json:"unitemized,omitempty"`
	// Kinds are every kind of interesting call the kernel counted for the
	// tree, itemized or not: they survive the event budget, so what a
	// tree's calls asked for (a seccomp filter, say) is known past it.
	Kinds []CallKind `json:"kinds,omitempty"`
	// Seeded is set when the tree's root was already running when the
	// watch began: what it did before then is unknown.
	Seeded bool `json:"seeded,omitempty"`
	// OverBudget is set when the tree streamed its whole budget of syscall
	// events: later kinds of calls are counted (Kinds, Unitemized) without
	// their arguments.
	OverBudget bool `json:"over_budget,omitempty"`
	// Capped counts the tree's events the kernel delivered but the report
	// did not keep (past Options.MaxEvents for the watch).
	Capped uint64 `json:"capped,omitempty"`
}

// CallKind is one kind of interesting call of a tree as the kernel counts
// it: the syscall, its result and its key argument.
type CallKind struct {
	Syscall string `json:"syscall"`
	// Errno names the error the calls returned, "" for success.
	Errno string `json:"errno,omitempty"`
	// Key is the key argument: the first argument, except for opens (a
	// hash of the path) and connect, sendto and sendmsg (a hash of the
	// destination).
	Key uint64 `json:"key"`
	// Calls is how many calls of the kind the kernel counted.
	Calls uint64 `json:"calls"`
	// Itemized is set when the kind's first call is among the tree's
	// events.
	Itemized bool `json:"itemized,omitempty"`
}

// FirstArgCalls counts a syscall's calls by first argument (for a syscall
// the kernel keys by it: not opens, connect, sendto or sendmsg), from the
// tree's kinds and the events streamed without a kind (when the kernel's
// table of kinds was full). Total is their sum, to hold against the
// syscall's count in Syscalls: calls in neither went unaccounted.
func (t *Tree) FirstArgCalls(syscall string) (byArg map[uint64]uint64, total uint64) {
	byArg = map[uint64]uint64{}
	for _, k := range t.Kinds {
		if k.Syscall == syscall {
			byArg[k.Key] += k.Calls
			total += k.Calls
		}
	}
	for _, ev := range t.Events {
		if ev.Kind == KindSyscall && ev.Syscall == syscall && ev.sig == nil {
			byArg[ev.Args[0]]++
			total++
		}
	}
	return byArg, total
}

// Watch scopes.
const (
	// ScopeNamespace watches a pid namespace (and those nested in it).
	ScopeNamespace = "pid-namespace"
	// ScopeMount watches a mount namespace: a sandbox that shares the
	// host's pid namespace but has a mount namespace of its own (a
	// container run with the host's pid namespace), where every process
	// that enters it (each `docker exec`) execs.
	ScopeMount = "mount-namespace"
	// ScopeTree watches process trees in the host's pid namespace: one
	// process's (gVisor's sentry) or, for a sandbox whose every command is
	// a host process tree of its own, each command's (Tracer.WatchTrees).
	ScopeTree = "process-tree"
)

// Report is what the tracer saw of one watched pid namespace or tree.
type Report struct {
	// NS is the pid or mount namespace's inode, or a watched tree's key.
	NS uint32 `json:"pid_ns"`
	// Scope is ScopeNamespace, ScopeMount or ScopeTree.
	Scope string `json:"scope"`
	// Partial is set when processes ran in the namespace before the watch
	// began (their earlier doings are missing).
	Partial bool `json:"partial,omitempty"`
	// Trees are the process trees by root tgid.
	Trees map[uint32]*Tree `json:"trees"`
	// Lost counts what went unrecorded while the watch was on (lost counters
	// are kernel-wide, so a loss anywhere is charged to every watch).
	Lost Lost `json:"lost"`
}

// Syscalls sums every tree's counts.
func (r *Report) Syscalls() map[string]Count {
	out := map[string]Count{}
	for _, t := range r.Trees {
		for name, c := range t.Syscalls {
			sum := out[name]
			sum.add(c)
			out[name] = sum
		}
	}
	return out
}

// Surface is the sorted set of distinct syscalls the sandbox's processes made
// on the host kernel.
func (r *Report) Surface() []string {
	return slices.Sorted(maps.Keys(r.Syscalls()))
}

// TreeWithArg returns the tree whose root was exec'd with arg among its
// arguments (e.g. a probe's one-time token), or nil; never a held
// command's tree (Held), whose command line names what it starts.
func (r *Report) TreeWithArg(arg string) *Tree {
	for _, t := range r.Trees {
		if !t.Held && slices.Contains(t.Argv, arg) {
			return t
		}
	}
	return nil
}

// Event kinds.
const (
	KindExec    = "exec"
	KindFork    = "fork"
	KindExit    = "exit"
	KindSyscall = "syscall"
)

// Event is one event the kernel sent through the ring buffer.
type Event struct {
	// Kind is one of the Kind constants.
	Kind string `json:"kind"`
	// Nanos is the kernel's monotonic clock when the event happened.
	Nanos uint64 `json:"ns"`
	Root  uint32 `json:"root"`
	TGID  uint32 `json:"tgid"`
	PID   uint32 `json:"pid"`
	Comm  string `json:"comm"`
	// Syscall, Ret and Errno describe a syscall event; Args are its raw
	// arguments.
	Syscall string `json:"syscall,omitempty"`
	// Calls is how many calls a syscall event stands for: itself and the
	// tree's later calls of the same syscall with the same result (errno,
	// or success) and key argument (the destination for connect, sendto and
	// sendmsg, the path for opens, the first argument otherwise: ptrace's
	// request, setuid's uid), which the kernel counts without streaming.
	Calls uint64 `json:"calls,omitempty"`
	// sig is the kernel's key for the event's kind, when it counts alikes.
	sig   *tracerSigKey
	Ret   int64     `json:"ret,omitempty"`
	Errno string    `json:"errno,omitempty"`
	Args  [6]uint64 `json:"args,omitzero"`
	// Path is the exec'd file or the sensitive path opened.
	Path string `json:"path,omitempty"`
	// Argv is an exec's arguments.
	Argv []string `json:"argv,omitempty"`
	// Child is a fork's new process (host tgid).
	Child uint32 `json:"child,omitempty"`
	// ExitCode is an exit's wait status.
	ExitCode int `json:"exit_code,omitempty"`
	// Addr is the destination of connect, sendto or sendmsg.
	Addr *SockAddr `json:"addr,omitempty"`
}

// SockAddr is a destination as the syscall gave it.
type SockAddr struct {
	Family string `json:"family"`
	// Addr and Port are set for inet and inet6; Path for unix sockets.
	Addr netip.Addr `json:"addr,omitzero"`
	Port uint16     `json:"port,omitempty"`
	Path string     `json:"path,omitempty"`
}

// String renders the address as host:port, a unix path or the family.
func (a *SockAddr) String() string {
	switch {
	case a.Addr.IsValid():
		return netip.AddrPortFrom(a.Addr, a.Port).String()
	case a.Path != "":
		return "unix:" + a.Path
	}
	return a.Family
}

// String renders an event on one line.
func (e Event) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%-7s tgid=%d comm=%s", e.Kind, e.TGID, e.Comm)
	switch e.Kind {
	case KindExec:
		fmt.Fprintf(&b, " %s %q", e.Path, e.Argv)
	case KindFork:
		fmt.Fprintf(&b, " child=%d", e.Child)
	case KindExit:
		fmt.Fprintf(&b, " status=%d", e.ExitCode)
	case KindSyscall:
		fmt.Fprintf(&b, " %s", e.Syscall)
		if e.Path != "" {
			fmt.Fprintf(&b, " %q", e.Path)
		}
		if e.Addr != nil {
			fmt.Fprintf(&b, " %s", e.Addr)
		}
		if e.Errno != "" {
			fmt.Fprintf(&b, " = %s", e.Errno)
		} else {
			fmt.Fprintf(&b, " = %d", e.Ret)
		}
		if e.Calls > 1 {
			fmt.Fprintf(&b, " (x%d)", e.Calls)
		}
	}
	return b.String()
}

// SyscallName names an x86_64 syscall number.
func SyscallName(nr int) string {
	if n, ok := arch.X86_64.SyscallNumbers[nr]; ok {
		return n
	}
	return fmt.Sprintf("syscall_%d", nr)
}

// SyscallNumber is the x86_64 number of a syscall name, or -1.
func SyscallNumber(name string) int {
	if n, ok := arch.X86_64.SyscallNames[name]; ok {
		return n
	}
	return -1
}

// errnoName names a negative syscall return, or "" for a success.
func errnoName(ret int64) string {
	if ret >= 0 || ret < -4095 {
		return ""
	}
	if n := unix.ErrnoName(unix.Errno(-ret)); n != "" {
		return n
	}
	return fmt.Sprintf("errno %d", -ret)
}
