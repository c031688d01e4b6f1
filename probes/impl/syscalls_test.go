package impl

import (
	"testing"

	"golang.org/x/sys/unix"

	"github.com/sandcheck/sandcheck/probes"
)

func TestSysOutcome(t *testing.T) {
	tests := []struct {
		errno unix.Errno
		want  probes.Outcome
	}{
		{0, probes.Escaped},
		{unix.EPERM, probes.Blocked},
		{unix.EACCES, probes.Blocked},
		{unix.ENOSYS, probes.Blocked},
		{unix.EINVAL, probes.Escaped},
		{unix.EFAULT, probes.Escaped},
		{unix.ENOENT, probes.Escaped},
		{unix.EOPNOTSUPP, probes.Escaped},
		{unix.ENODEV, probes.Escaped},
	}
	for _, tt := range tests {
		if got := sysOutcome(tt.errno); got != tt.want {
			t.Errorf("sysOutcome(%s) = %s, want %s", unix.ErrnoName(tt.errno), got, tt.want)
		}
	}
}

func TestSyscallResultEvidence(t *testing.T) {
	r := syscallResult("bpf", 0, unix.EPERM, nil, ev{})
	if r.Outcome != probes.Blocked || r.Evidence["errno"] != "EPERM(1)" {
		t.Errorf("EPERM gave %s with evidence %v", r.Outcome, r.Evidence)
	}
	released := false
	r = syscallResult("bpf", 7, 0, func(uintptr) { released = true }, ev{})
	if r.Outcome != probes.Escaped || !released {
		t.Errorf("success gave %s, released=%v", r.Outcome, released)
	}
}

func TestFileSafe(t *testing.T) {
	for in, want := range map[string]string{
		"abc-DEF_1.2": "abc-DEF_1.2",
		"../../etc":   "etc",
		"a/b\x00c d":  "abcd",
		"":            "",
	} {
		if got := fileSafe(in); got != want {
			t.Errorf("fileSafe(%q) = %q, want %q", in, got, want)
		}
	}
}
