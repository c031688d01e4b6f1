package bwrap

import (
	"encoding/binary"
	"testing"

	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"
)

// runFilter runs the compiled program on one system call in x/net/bpf's VM.
// The VM reads words big-endian, so each 32-bit word of struct
// seccomp_data is written that way: the program sees the values the kernel
// would show it.
func runFilter(t *testing.T, raw []byte, arch, nr uint32, args ...uint64) uint32 {
	t.Helper()
	var insts []bpf.RawInstruction
	for i := 0; i+8 <= len(raw); i += 8 {
		insts = append(insts, bpf.RawInstruction{
			Op: binary.NativeEndian.Uint16(raw[i:]), Jt: raw[i+2], Jf: raw[i+3], K: binary.NativeEndian.Uint32(raw[i+4:]),
		})
	}
	prog, ok := bpf.Disassemble(insts)
	if !ok {
		t.Fatal("the program does not disassemble")
	}
	vm, err := bpf.NewVM(prog)
	if err != nil {
		t.Fatalf("loading the program: %v", err)
	}
	data := make([]byte, 64)
	binary.BigEndian.PutUint32(data[0:], nr)
	binary.BigEndian.PutUint32(data[4:], arch)
	for i, a := range args {
		binary.BigEndian.PutUint32(data[16+8*i:], uint32(a))
		binary.BigEndian.PutUint32(data[20+8*i:], uint32(a>>32))
	}
	out, err := vm.Run(data)
	if err != nil {
		t.Fatalf("running the program: %v", err)
	}
	return uint32(out)
}

// TestSeccompProgramDecides checks the compiled default profile's answers
// against Docker's rules, argument checks included.
func TestSeccompProgramDecides(t *testing.T) {
	const (
		allow  = unix.SECCOMP_RET_ALLOW
		eperm  = unix.SECCOMP_RET_ERRNO | uint32(unix.EPERM)
		enosys = unix.SECCOMP_RET_ERRNO | uint32(unix.ENOSYS)
		x8664  = auditArchX8664
	)
	none, err := CompileProfile("../../fixtures/targets/seccomp-default.json", nil)
	if err != nil {
		t.Fatal(err)
	}
	admin, err := CompileProfile("../../fixtures/targets/seccomp-default.json", []string{"CAP_SYS_ADMIN"})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		prog []byte
		arch uint32
		nr   uint32
		args []uint64
		want uint32
	}{
		{"read", none, x8664, unix.SYS_READ, nil, allow},
		{"socket AF_INET", none, x8664, unix.SYS_SOCKET, []uint64{unix.AF_INET}, allow},
		{"socket AF_NETLINK (after 8 failed socket rules)", none, x8664, unix.SYS_SOCKET, []uint64{unix.AF_NETLINK}, allow},
		{"socket AF_VSOCK", none, x8664, unix.SYS_SOCKET, []uint64{unix.AF_VSOCK}, eperm},
		{"socket AF_INET in the high half", none, x8664, unix.SYS_SOCKET, []uint64{1<<32 | unix.AF_INET}, eperm},
		{"clone of a thread", none, x8664, unix.SYS_CLONE, []uint64{unix.CLONE_VM | unix.CLONE_THREAD}, allow},
		{"clone into a new user namespace", none, x8664, unix.SYS_CLONE, []uint64{unix.CLONE_NEWUSER}, eperm},
		{"clone3", none, x8664, unix.SYS_CLONE3, nil, enosys},
		{"unshare", none, x8664, unix.SYS_UNSHARE, nil, eperm},
		{"unshare with CAP_SYS_ADMIN", admin, x8664, unix.SYS_UNSHARE, nil, allow},
		{"mount", none, x8664, unix.SYS_MOUNT, nil, eperm},
		{"keyctl", none, x8664, unix.SYS_KEYCTL, nil, eperm},
		{"personality 0", none, x8664, unix.SYS_PERSONALITY, []uint64{0}, allow},
		{"personality READ_IMPLIES_EXEC", none, x8664, unix.SYS_PERSONALITY, []uint64{0x0400000}, eperm},
		{"io_uring_setup", none, x8664, unix.SYS_IO_URING_SETUP, nil, eperm},
		{"i386 call", none, 0x40000003, 1, nil, eperm},
		{"x32 call", none, x8664, x32Bit | unix.SYS_READ, nil, eperm},
	} {
		if got := runFilter(t, c.prog, c.arch, c.nr, c.args...); got != c.want {
			t.Errorf("%s: %#x, want %#x", c.name, got, c.want)
		}
	}
}
