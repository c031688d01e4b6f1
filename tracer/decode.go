//go:build linux && amd64

package tracer

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"net/netip"
	"unsafe"
)

// Kernel-side event kinds (bpf/tracer.h).
const (
	evExec    = 1
	evFork    = 2
	evExit    = 3
	evSyscall = 4
)

const (
	pathBytes = 256
	// maxSlots, noSlot and fastSyscalls mirror MAX_SLOTS, NO_SLOT and
	// FAST_SYSCALLS in bpf/tracer.h.
	maxSlots     = 32
	noSlot       = 0xffffffff
	fastSyscalls = 512
	// argSyscallMax bounds the syscalls the kernel side can flag as worth
	// an event (bpf/tracer.h: ARG_WORDS).
	argSyscallMax = 448
	// budgetNr and treeEvents mirror BUDGET_NR and TREE_EVENTS.
	budgetNr   = 0xffffffff
	treeEvents = 1024
)

// decode turns one ring-buffer record into the watched namespace and the
// event.
func decode(raw []byte) (uint32, Event, error) {
	var r tracerEvent
	if len(raw) < int(unsafe.Sizeof(r)) {
		return 0, Event{}, fmt.Errorf("event of %d bytes, want %d", len(raw), unsafe.Sizeof(r))
	}
	if _, err := binary.Decode(raw, binary.NativeEndian, &r); err != nil {
		return 0, Event{}, fmt.Errorf("decoding event: %w", err)
	}
	ev := Event{Nanos: r.Ts, Root: r.Root, TGID: r.Tgid, PID: r.Pid, Comm: cstr(int8s(r.Comm[:]))}
	switch r.Kind {
	case evExec:
		ev.Kind = KindExec
		ev.Path = cstr(r.Data[:pathBytes])
		n := min(int(r.Len), len(r.Data)-pathBytes)
		ev.Argv = splitArgv(r.Data[pathBytes : pathBytes+n])
	case evFork:
		ev.Kind, ev.Child = KindFork, r.Other
	case evExit:
		ev.Kind, ev.ExitCode = KindExit, int(r.Ret)
	case evSyscall:
		ev.Kind, ev.Syscall, ev.Ret, ev.Errno, ev.Args = KindSyscall, SyscallName(int(r.Nr)), r.Ret, errnoName(r.Ret), r.Args
		ev.Calls = 1
		if r.Other == 1 {
			ev.sig = &tracerSigKey{Ns: r.Ns, Root: r.Root, Nr: uint32(r.Nr), Err: sigErr(r.Ret), Disc: r.Disc}
		}
		switch ev.Syscall {
		case "connect", "sendto", "sendmsg":
			ev.Addr = sockaddr(r.Data[:min(int(r.Len), len(r.Data))])
		case "open", "openat", "openat2":
			ev.Path = cstr(r.Data[:pathBytes])
		}
	default:
		return 0, Event{}, fmt.Errorf("unknown event kind %d", r.Kind)
	}
	return r.Ns, ev, nil
}

// sigErr is a result as the kernel side keys it: the errno (negative), or 0
// for any success.
func sigErr(ret int64) int32 {
	if ret < 0 && ret >= -4095 {
		return int32(ret)
	}
	return 0
}

// sockaddr parses a struct sockaddr as the process passed it.
func sockaddr(b []byte) *SockAddr {
	if len(b) < 2 {
		return &SockAddr{Family: "unknown"}
	}
	fam := binary.NativeEndian.Uint16(b)
	switch {
	case fam == 2 && len(b) >= 8: // AF_INET
		return &SockAddr{Family: "inet", Port: binary.BigEndian.Uint16(b[2:]), Addr: netip.AddrFrom4([4]byte(b[4:8]))}
	case fam == 10 && len(b) >= 24: // AF_INET6
		return &SockAddr{Family: "inet6", Port: binary.BigEndian.Uint16(b[2:]), Addr: netip.AddrFrom16([16]byte(b[8:24])).Unmap()}
	case fam == 1: // AF_UNIX; an abstract name starts with NUL
		p := b[2:]
		if len(p) > 0 && p[0] == 0 {
			return &SockAddr{Family: "unix", Path: "@" + string(bytes.TrimRight(p[1:], "\x00"))}
		}
		return &SockAddr{Family: "unix", Path: cstr(p)}
	case fam == 16:
		return &SockAddr{Family: "netlink"}
	case fam == 17:
		return &SockAddr{Family: "packet"}
	}
	return &SockAddr{Family: fmt.Sprintf("family %d", fam)}
}

func cstr(b []byte) string {
	if i := bytes.IndexByte(b, 0); i >= 0 {
		b = b[:i]
	}
	return string(b)
}

func int8s(s []int8) []byte {
	b := make([]byte, len(s))
	for i, c := range s {
		b[i] = byte(c)
	}
	return b
}

func splitArgv(b []byte) []string {
	b = bytes.TrimRight(b, "\x00")
	if len(b) == 0 {
		return nil
	}
	parts := bytes.Split(b, []byte{0})
	out := make([]string, len(parts))
	for i, p := range parts {
		out[i] = string(p)
	}
	return out
}
