package kubernetes

import (
	"bytes"
	"encoding/json"
	"os"
	"slices"
	"testing"
)

// nodeProfile is the seccomp profile the sandcheck cluster's node installs
// for the hardened pod template (scripts/cluster/up.sh), and dockerProfile
// the upstream Docker default it is derived from.
const (
	nodeProfile   = "../../fixtures/kubernetes/seccomp-nocaps.json"
	dockerProfile = "../../fixtures/targets/seccomp-default.json"
)

// dockerSeccomp is the part of Docker's profile format the derivation reads.
type dockerSeccomp struct {
	DefaultAction   string `json:"defaultAction"`
	DefaultErrnoRet *uint  `json:"defaultErrnoRet,omitempty"`
	Syscalls        []struct {
		Names    []string          `json:"names"`
		Action   string            `json:"action"`
		Args     []json.RawMessage `json:"args,omitempty"`
		ErrnoRet *uint             `json:"errnoRet,omitempty"`
		Includes struct {
			Caps   []string `json:"caps"`
			Arches []string `json:"arches"`
		} `json:"includes"`
		Excludes struct {
			Caps   []string `json:"caps"`
			Arches []string `json:"arches"`
		} `json:"excludes"`
	} `json:"syscalls"`
}

// ociSyscall and ociSeccomp are the OCI runtime spec's linux.seccomp, the
// format containerd reads a Localhost profile in.
type ociSyscall struct {
	Names    []string          `json:"names"`
	Action   string            `json:"action"`
	ErrnoRet *uint             `json:"errnoRet,omitempty"`
	Args     []json.RawMessage `json:"args,omitempty"`
}

type ociSeccomp struct {
	DefaultAction   string       `json:"defaultAction"`
	DefaultErrnoRet *uint        `json:"defaultErrnoRet,omitempty"`
	Architectures   []string     `json:"architectures"`
	Syscalls        []ociSyscall `json:"syscalls"`
}

// nocaps resolves Docker's profile for a container holding no capability
// on x86-64: a rule that needs a capability goes, one that a capability
// would exclude stays, rules for other architectures go. containerd reads a
// Localhost profile as the OCI spec's seccomp section as it is: Docker's
// includes and excludes are unknown fields there, so Docker's own file
// would allow every capability-gated call (mount, unshare, bpf, setns...)
// to any pod; the whole-catalog hardened run showed it.
func nocaps(d dockerSeccomp) ociSeccomp {
	out := ociSeccomp{DefaultAction: d.DefaultAction, DefaultErrnoRet: d.DefaultErrnoRet,
		Architectures: []string{"SCMP_ARCH_X86_64", "SCMP_ARCH_X86", "SCMP_ARCH_X32"}}
	const arch = "amd64"
	for _, s := range d.Syscalls {
		if len(s.Includes.Caps) > 0 || slices.Contains(s.Excludes.Arches, arch) ||
			(len(s.Includes.Arches) > 0 && !slices.Contains(s.Includes.Arches, arch)) {
			continue
		}
		out.Syscalls = append(out.Syscalls, ociSyscall{Names: s.Names, Action: s.Action, ErrnoRet: s.ErrnoRet, Args: s.Args})
	}
	return out
}

// The node's profile is exactly Docker's default resolved for a container
// without capabilities (SANDCHECK_UPDATE=1 rewrites it).
func TestNodeSeccompProfile(t *testing.T) {
	b, err := os.ReadFile(dockerProfile)
	if err != nil {
		t.Fatal(err)
	}
	var d dockerSeccomp
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatal(err)
	}
	want, err := json.MarshalIndent(nocaps(d), "", "\t")
	if err != nil {
		t.Fatal(err)
	}
	want = append(want, '\n')
	if os.Getenv("SANDCHECK_UPDATE") != "" {
		if err := os.WriteFile(nodeProfile, want, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := os.ReadFile(nodeProfile)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("%s is not %s resolved for no capabilities: run SANDCHECK_UPDATE=1 go test -run TestNodeSeccompProfile ./runners/kubernetes/", nodeProfile, dockerProfile)
	}
	var p ociSeccomp
	if err := json.Unmarshal(got, &p); err != nil {
		t.Fatal(err)
	}
	allowed := map[string]bool{}
	for _, s := range p.Syscalls {
		for _, n := range s.Names {
			if s.Action == "SCMP_ACT_ALLOW" && len(s.Args) == 0 {
				allowed[n] = true
			}
		}
	}
	for _, n := range []string{"mount", "unshare", "setns", "bpf", "io_uring_setup", "kcmp", "perf_event_open"} {
		if allowed[n] {
			t.Errorf("the node profile allows %s unconditionally", n)
		}
	}
	if !allowed["read"] || !allowed["execve"] {
		t.Error("the node profile does not allow read and execve")
	}
}
