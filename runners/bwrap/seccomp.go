package bwrap

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

	seccompbpf "github.com/elastic/go-seccomp-bpf"
	"github.com/elastic/go-seccomp-bpf/arch"
	profile "github.com/moby/profiles/seccomp"
	specs "github.com/opencontainers/runtime-spec/specs-go"
	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"
)

// maxProfile bounds a seccomp profile file.
const maxProfile = 4 << 20

// CompileProfile reads a Docker-format seccomp profile (the JSON the
// Docker targets use) and compiles it for this machine's architecture into
// the raw BPF program bwrap --seccomp loads, for a sandbox keeping the
// capabilities caps (names with the CAP_ prefix): rules are included or
// excluded by capability, architecture and kernel version as Docker does.
// The program is laid out here, one block per rule and syscall, with
// golang.org/x/net/bpf; the syscall table is github.com/elastic/go-seccomp-bpf's
// (pure Go, no cgo). Its own assembler is not used: it does not reload the
// syscall number after an argument check, so a rule after a failed argument
// check compares an argument with syscall numbers (socket(AF_NETLINK) was
// refused under Docker's default profile). Syscall names the table does not
// know are left out, as libseccomp leaves out names unknown to it; such a
// syscall then gets the default action, as do other architectures' calls
// and the x32 ABI.
func CompileProfile(path string, caps []string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("reading seccomp profile: %w", err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxProfile+1))
	if err != nil {
		return nil, fmt.Errorf("reading seccomp profile %s: %w", path, err)
	}
	if len(b) > maxProfile {
		return nil, fmt.Errorf("seccomp profile %s is larger than %d bytes", path, maxProfile)
	}
	var p profile.Seccomp
	if err := json.Unmarshal(b, &p); err != nil {
		return nil, fmt.Errorf("decoding seccomp profile %s: %w", path, err)
	}
	raw, err := compile(&p, caps)
	if err != nil {
		return nil, fmt.Errorf("compiling seccomp profile %s: %w", path, err)
	}
	return raw, nil
}

func compile(p *profile.Seccomp, caps []string) ([]byte, error) {
	info, err := arch.GetInfo("")
	if err != nil {
		return nil, err
	}
	if info.Name != "x86_64" {
		return nil, fmt.Errorf("compiling for %s: only x86_64 is supported", info.Name)
	}
	def, err := action(p.DefaultAction, p.DefaultErrnoRet)
	if err != nil {
		return nil, fmt.Errorf("default action: %w", err)
	}
	kernel, err := kernelVersion()
	if err != nil {
		return nil, err
	}
	goArch := archName(info.Name)
	prog := []bpf.Instruction{
		// Another architecture's calling convention (i386 through int 0x80)
		// gets the default action; so does the x32 ABI.
		bpf.LoadAbsolute{Off: offArch, Size: 4},
		bpf.JumpIf{Cond: bpf.JumpEqual, Val: auditArchX8664, SkipTrue: 1},
		bpf.RetConstant{Val: uint32(def)},
		bpf.LoadAbsolute{Off: offNr, Size: 4},
		bpf.JumpIf{Cond: bpf.JumpGreaterOrEqual, Val: x32Bit, SkipFalse: 1},
		bpf.RetConstant{Val: uint32(def)},
	}
	for i, s := range p.Syscalls {
		if !applies(s, caps, goArch, kernel) {
			continue
		}
		act, err := action(s.Action, s.ErrnoRet)
		if err != nil {
			return nil, fmt.Errorf("rule %d: %w", i, err)
		}
		names := s.Names
		if s.Name != "" {
			names = append(names, s.Name)
		}
		for _, n := range names {
			nr, ok := info.SyscallNames[n]
			if !ok {
				continue
			}
			block, err := ruleBlock(uint32(nr), s.Args, uint32(act))
			if err != nil {
				return nil, fmt.Errorf("rule %d (%s): %w", i, n, err)
			}
			prog = append(prog, block...)
		}
	}
	prog = append(prog, bpf.RetConstant{Val: uint32(def)})
	if len(prog) > maxInstructions {
		return nil, fmt.Errorf("the program has %d instructions, more than the kernel's %d", len(prog), maxInstructions)
	}
	rawInsts, err := bpf.Assemble(prog)
	if err != nil {
		return nil, fmt.Errorf("assembling BPF: %w", err)
	}
	var buf bytes.Buffer
	for _, r := range rawInsts {
		// struct sock_filter: u16 code, u8 jt, u8 jf, u32 k, native order.
		_ = binary.Write(&buf, binary.NativeEndian, r.Op)
		buf.WriteByte(r.Jt)
		buf.WriteByte(r.Jf)
		_ = binary.Write(&buf, binary.NativeEndian, r.K)
	}
	return buf.Bytes(), nil
}

// Offsets in struct seccomp_data (little-endian x86_64) and constants.
const (
	offNr           = 0
	offArch         = 4
	offArgs         = 16
	auditArchX8664  = 0xc000003e
	x32Bit          = 0x40000000
	maxInstructions = 4096
)

// Jump targets while a rule block is built: the next instruction, the end
// of the current argument check (it holds), the end of the block (the rule
// does not match).
const (
	tNext = iota
	tCondEnd
	tFail
)

// jump is a conditional jump whose targets are resolved once the block is
// laid out.
type jump struct {
	cond bpf.JumpTest
	val  uint32
	t, f int
}

// ruleBlock is the code of one rule for one syscall: it reloads the
// syscall number (every block starts from the same state, whatever the
// previous one loaded), checks every argument condition (all must hold,
// on the full 64 bits) and returns the action; a failed check skips to the
// next block.
func ruleBlock(nr uint32, args []specs.LinuxSeccompArg, act uint32) ([]bpf.Instruction, error) {
	items := []any{bpf.LoadAbsolute{Off: offNr, Size: 4}, jump{bpf.JumpEqual, nr, tNext, tFail}}
	var condEnds []int // index (in items) where each condition ends
	for _, a := range args {
		code, err := condition(a)
		if err != nil {
			return nil, err
		}
		start := len(items)
		items = append(items, code...)
		condEnds = append(condEnds, len(items))
		// Remember the condition's end in each of its jumps.
		for i := start; i < len(items); i++ {
			if j, ok := items[i].(jump); ok {
				items[i] = condJump{jump: j, end: len(items)}
			}
		}
	}
	items = append(items, bpf.RetConstant{Val: act})
	blockEnd := len(items)
	out := make([]bpf.Instruction, len(items))
	for i, it := range items {
		var j jump
		end := blockEnd
		switch v := it.(type) {
		case bpf.Instruction:
			out[i] = v
			continue
		case jump:
			j = v
		case condJump:
			j, end = v.jump, v.end
		}
		skip := func(t int) (uint8, error) {
			var to int
			switch t {
			case tNext:
				to = i + 1
			case tCondEnd:
				to = end
			case tFail:
				to = blockEnd
			}
			n := to - i - 1
			if n < 0 || n > 255 {
				return 0, fmt.Errorf("jump of %d instructions", n)
			}
			return uint8(n), nil
		}
		st, err := skip(j.t)
		if err != nil {
			return nil, err
		}
		sf, err := skip(j.f)
		if err != nil {
			return nil, err
		}
		out[i] = bpf.JumpIf{Cond: j.cond, Val: j.val, SkipTrue: st, SkipFalse: sf}
	}
	return out, nil
}

// condJump is a jump inside an argument check, with the check's end.
type condJump struct {
	jump
	end int
}

// condition is the code of one argument check, on the argument's high
// and low 32 bits.
func condition(a specs.LinuxSeccompArg) ([]any, error) {
	if a.Index > 5 {
		return nil, fmt.Errorf("argument %d does not exist", a.Index)
	}
	lo := bpf.LoadAbsolute{Off: offArgs + 8*uint32(a.Index), Size: 4}
	hi := bpf.LoadAbsolute{Off: offArgs + 8*uint32(a.Index) + 4, Size: 4}
	vhi, vlo := uint32(a.Value>>32), uint32(a.Value)
	switch a.Op {
	case specs.OpEqualTo:
		return []any{hi, jump{bpf.JumpEqual, vhi, tNext, tFail}, lo, jump{bpf.JumpEqual, vlo, tNext, tFail}}, nil
	case specs.OpNotEqual:
		return []any{hi, jump{bpf.JumpEqual, vhi, tNext, tCondEnd}, lo, jump{bpf.JumpEqual, vlo, tFail, tNext}}, nil
	case specs.OpMaskedEqual:
		// (arg & Value) == ValueTwo
		mhi, mlo := vhi, vlo
		whi, wlo := uint32(a.ValueTwo>>32), uint32(a.ValueTwo)
		return []any{hi, bpf.ALUOpConstant{Op: bpf.ALUOpAnd, Val: mhi}, jump{bpf.JumpEqual, whi, tNext, tFail},
			lo, bpf.ALUOpConstant{Op: bpf.ALUOpAnd, Val: mlo}, jump{bpf.JumpEqual, wlo, tNext, tFail}}, nil
	case specs.OpGreaterThan, specs.OpGreaterEqual:
		last := bpf.JumpGreaterThan
		if a.Op == specs.OpGreaterEqual {
			last = bpf.JumpGreaterOrEqual
		}
		return []any{hi, jump{bpf.JumpGreaterThan, vhi, tCondEnd, tNext}, jump{bpf.JumpEqual, vhi, tNext, tFail},
			lo, jump{last, vlo, tNext, tFail}}, nil
	case specs.OpLessThan, specs.OpLessEqual:
		// Fails when the low half is >= (LT) or > (LE) the value's.
		last := bpf.JumpGreaterOrEqual
		if a.Op == specs.OpLessEqual {
			last = bpf.JumpGreaterThan
		}
		return []any{hi, jump{bpf.JumpGreaterThan, vhi, tFail, tNext}, jump{bpf.JumpEqual, vhi, tNext, tCondEnd},
			lo, jump{last, vlo, tFail, tNext}}, nil
	}
	return nil, fmt.Errorf("operator %s is not supported", a.Op)
}

// action maps a profile action to the compiler's.
func action(a specs.LinuxSeccompAction, errno *uint) (seccompbpf.Action, error) {
	switch a {
	case specs.ActAllow:
		return seccompbpf.ActionAllow, nil
	case specs.ActErrno:
		e := uint(unix.EPERM)
		if errno != nil {
			e = *errno
		}
		return seccompbpf.ActionErrno | seccompbpf.Action(e&0xffff), nil
	case specs.ActKill, specs.ActKillThread:
		return seccompbpf.ActionKillThread, nil
	case specs.ActKillProcess:
		return seccompbpf.ActionKillProcess, nil
	case specs.ActTrap:
		return seccompbpf.ActionTrap, nil
	case specs.ActLog:
		return seccompbpf.ActionLog, nil
	}
	return 0, fmt.Errorf("action %s is not supported", a)
}

// applies decides a rule's includes and excludes as Docker does: every
// included capability must be kept, the architecture listed, the kernel
// recent enough; any excluded capability kept or architecture listed
// leaves it out.
func applies(s *profile.Syscall, caps []string, goArch string, kernel [2]uint64) bool {
	if in := s.Includes; in != nil {
		for _, c := range in.Caps {
			if !slices.Contains(caps, c) {
				return false
			}
		}
		if len(in.Arches) > 0 && !slices.Contains(in.Arches, goArch) {
			return false
		}
		if k := in.MinKernel; k != nil && (kernel[0] < k.Kernel || (kernel[0] == k.Kernel && kernel[1] < k.Major)) {
			return false
		}
	}
	if ex := s.Excludes; ex != nil {
		for _, c := range ex.Caps {
			if slices.Contains(caps, c) {
				return false
			}
		}
		if slices.Contains(ex.Arches, goArch) {
			return false
		}
	}
	return true
}

// archName is the architecture's name as Docker's profiles write it.
func archName(name string) string {
	switch name {
	case "x86_64":
		return "amd64"
	case "i386":
		return "x86"
	case "aarch64":
		return "arm64"
	}
	return name
}

func kernelVersion() ([2]uint64, error) {
	var u unix.Utsname
	if err := unix.Uname(&u); err != nil {
		return [2]uint64{}, fmt.Errorf("reading the kernel version: %w", err)
	}
	rel := unix.ByteSliceToString(u.Release[:])
	var k, m uint64
	if _, err := fmt.Sscanf(strings.SplitN(rel, "-", 2)[0], "%d.%d", &k, &m); err != nil {
		return [2]uint64{}, fmt.Errorf("reading kernel version %q: %w", rel, err)
	}
	return [2]uint64{k, m}, nil
}
