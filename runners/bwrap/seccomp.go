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
// The compiler is github.com/elastic/go-seccomp-bpf (pure Go, no cgo).
// Syscall names the compiler's table does not know are left out, as
// libseccomp leaves out names unknown to it; such a syscall then gets the
// default action.
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
	def, err := action(p.DefaultAction, p.DefaultErrnoRet)
	if err != nil {
		return nil, fmt.Errorf("default action: %w", err)
	}
	if def != seccompbpf.ActionErrno && def != seccompbpf.ActionAllow && def != seccompbpf.ActionKillProcess && def != seccompbpf.ActionKillThread {
		return nil, fmt.Errorf("default action %s with errno %v: only EPERM is supported", p.DefaultAction, p.DefaultErrnoRet)
	}
	kernel, err := kernelVersion()
	if err != nil {
		return nil, err
	}
	goArch := archName(info.Name)
	policy := seccompbpf.Policy{DefaultAction: def}
	for i, s := range p.Syscalls {
		if !applies(s, caps, goArch, kernel) {
			continue
		}
		act, err := action(s.Action, s.ErrnoRet)
		if err != nil {
			return nil, fmt.Errorf("rule %d: %w", i, err)
		}
		g := seccompbpf.SyscallGroup{Action: act}
		names := s.Names
		if s.Name != "" {
			names = append(names, s.Name)
		}
		for _, n := range names {
			if _, ok := info.SyscallNames[n]; !ok {
				continue
			}
			if len(s.Args) == 0 {
				g.Names = append(g.Names, n)
				continue
			}
			conds, err := conditions(s.Args)
			if err != nil {
				return nil, fmt.Errorf("rule %d (%s): %w", i, n, err)
			}
			g.NamesWithCondtions = append(g.NamesWithCondtions, seccompbpf.NameWithConditions{Name: n, Conditions: conds})
		}
		if len(g.Names)+len(g.NamesWithCondtions) > 0 {
			policy.Syscalls = append(policy.Syscalls, g)
		}
	}
	insts, err := policy.Assemble()
	if err != nil {
		return nil, err
	}
	rawInsts, err := bpf.Assemble(insts)
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

// action maps a profile action to the compiler's.
func action(a specs.LinuxSeccompAction, errno *uint) (seccompbpf.Action, error) {
	switch a {
	case specs.ActAllow:
		return seccompbpf.ActionAllow, nil
	case specs.ActErrno:
		if errno == nil || *errno == uint(unix.EPERM) {
			return seccompbpf.ActionErrno, nil
		}
		return seccompbpf.ActionErrno | seccompbpf.Action(*errno&0xffff), nil
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

// conditions maps a rule's argument checks (all must hold) to the
// compiler's. A masked compare is supported where it is a bits-clear test
// (expected value 0) or a one-bit test.
func conditions(args []specs.LinuxSeccompArg) (seccompbpf.ArgumentConditions, error) {
	var out seccompbpf.ArgumentConditions
	for _, a := range args {
		c := seccompbpf.Condition{Argument: uint32(a.Index), Value: a.Value}
		switch a.Op {
		case specs.OpEqualTo:
			c.Operation = seccompbpf.Equal
		case specs.OpNotEqual:
			c.Operation = seccompbpf.NotEqual
		case specs.OpLessThan:
			c.Operation = seccompbpf.LessThan
		case specs.OpLessEqual:
			c.Operation = seccompbpf.LessOrEqual
		case specs.OpGreaterThan:
			c.Operation = seccompbpf.GreaterThan
		case specs.OpGreaterEqual:
			c.Operation = seccompbpf.GreaterOrEqual
		case specs.OpMaskedEqual:
			switch {
			case a.ValueTwo == 0:
				c.Operation = seccompbpf.BitsNotSet
			case a.ValueTwo == a.Value && a.Value&(a.Value-1) == 0:
				c.Operation = seccompbpf.BitsSet
			default:
				return nil, fmt.Errorf("masked compare of argument %d with mask %#x and value %#x is not supported", a.Index, a.Value, a.ValueTwo)
			}
		default:
			return nil, fmt.Errorf("operator %s is not supported", a.Op)
		}
		out = append(out, c)
	}
	return out, nil
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
