package engine

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/moby/profiles/seccomp"

	"github.com/sandcheck/sandcheck/probes"
	"github.com/sandcheck/sandcheck/runners"
	"github.com/sandcheck/sandcheck/targets"
)

// hardenedCarryView is a hardened box's view: no privilege, every
// capability dropped, a custom seccomp profile, read-only root, tmpfs
// scratch, only the probe's read-only folder bound.
func hardenedCarryView(t *testing.T) *runners.RuntimeView {
	return &runners.RuntimeView{Runtime: "runc", CapDrop: []string{"ALL"}, Seccomp: "custom", ReadOnlyRootfs: true,
		Mounts: []runners.Mount{
			{Type: "bind", Source: t.TempDir(), Destination: runners.ProbeMount, ReadOnly: true},
			{Type: "tmpfs", Destination: "/scratch"},
		}}
}

// refusingProfile is a custom profile that refuses add_key (Docker's
// default: not on the allow list).
func refusingProfile() (*seccomp.Seccomp, error) { return seccomp.DefaultProfile(), nil }

// TestCarryoverFact: the host confirms a carry-over probe's "not found"
// only when the check ran in a fresh sandbox the plant's box could not
// reach; a check in the plant's own box, a box with an avenue, a kind the
// host does not know and a view it lacks all leave the probe's word alone
// (no indication, precondition none).
func TestCarryoverFact(t *testing.T) {
	writable := func(v *runners.RuntimeView) {
		v.Mounts = append(v.Mounts, runners.Mount{Type: "bind", Source: t.TempDir(), Destination: "/work"})
	}
	allowAll := func() (*seccomp.Seccomp, error) { return profileJSON(t, `{"defaultAction":"SCMP_ACT_ALLOW"}`), nil }
	unreadable := func() (*seccomp.Seccomp, error) { return nil, errors.New("no file") }
	for _, tt := range []struct {
		name     string
		kind     string
		fresh    bool
		edit     func(*runners.RuntimeView)
		noView   bool
		pidHost  bool
		profile  func() (*seccomp.Seccomp, error)
		settled  bool
		mentions string
	}{
		{name: "process, fresh box, no avenue", kind: "processes", fresh: true, settled: true, mentions: "fresh sandbox"},
		{name: "scratch, fresh box, no avenue", kind: "scratch", fresh: true, settled: true},
		{name: "keyring, fresh box, filter refuses add_key", kind: "keyring", fresh: true, settled: true},
		{name: "same box (exec launch)", kind: "processes", fresh: false, mentions: "left running"},
		{name: "same box, scratch", kind: "scratch", fresh: false},
		{name: "process, host PID namespace", kind: "processes", fresh: true, pidHost: true, mentions: "PID namespace"},
		{name: "process, privileged", kind: "processes", fresh: true, edit: func(v *runners.RuntimeView) { v.Privileged = true }, mentions: "privileged"},
		{name: "scratch, writable host folder", kind: "scratch", fresh: true, edit: writable, mentions: "writable host folder"},
		{name: "keyring, filter lets add_key through", kind: "keyring", fresh: true, profile: allowAll, mentions: "add_key through"},
		{name: "keyring, unconfined", kind: "keyring", fresh: true, edit: func(v *runners.RuntimeView) { v.Seccomp = "unconfined" }, mentions: "unconfined"},
		{name: "keyring, profile unreadable", kind: "keyring", fresh: true, profile: unreadable, mentions: "cannot read"},
		{name: "keyring, seccomp unknown", kind: "keyring", fresh: true, edit: func(v *runners.RuntimeView) { v.Unknown = []string{"seccomp"} }, mentions: "could not tell"},
		{name: "keyring, gVisor's own kernel", kind: "keyring", fresh: true, profile: allowAll, edit: func(v *runners.RuntimeView) { v.Runtime = "runsc" }, settled: true},
		{name: "keyring, docker default profile", kind: "keyring", fresh: true, profile: unreadable, edit: func(v *runners.RuntimeView) { v.Seccomp = "default" }, settled: true},
		{name: "no view", kind: "scratch", fresh: true, noView: true, mentions: "no runtime view"},
		{name: "unknown kind", kind: "sockets", fresh: true, mentions: "knows no carry-over check"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			v := hardenedCarryView(t)
			if tt.edit != nil {
				tt.edit(v)
			}
			if tt.noView {
				v = nil
			}
			profile := tt.profile
			if profile == nil {
				profile = refusingProfile
			}
			it := carryoverFact(tt.kind, tt.fresh, "0123456789abcdef", v, tt.pidHost, profile)
			if it.Source != "runtime" || it.Kind != "carryover-"+tt.kind {
				t.Errorf("item %s/%s, want runtime/carryover-%s", it.Source, it.Kind, tt.kind)
			}
			if tt.settled {
				if it.Indicates != probes.Blocked || it.Data["precondition"] != preconditionNoAvenue {
					t.Errorf("indicates %q precondition %q, want blocked and no-avenue: %s", it.Indicates, it.Data["precondition"], it.Summary)
				}
			} else if it.Indicates != "" || it.Data["precondition"] != preconditionNone {
				t.Errorf("indicates %q precondition %q, want no indication and none: %s", it.Indicates, it.Data["precondition"], it.Summary)
			}
			if !strings.Contains(it.Summary, tt.mentions) {
				t.Errorf("summary %q does not mention %q", it.Summary, tt.mentions)
			}
		})
	}
}

// TestSyscallAllowed reads a profile conservatively: a rule that can run
// the call, whatever its conditions, or a default that runs it, allows it.
func TestSyscallAllowed(t *testing.T) {
	for _, tt := range []struct {
		name, profile string
		want          bool
	}{
		{"default errno, not named", `{"defaultAction":"SCMP_ACT_ERRNO"}`, false},
		{"default allow, not named", `{"defaultAction":"SCMP_ACT_ALLOW"}`, true},
		{"default allow, named errno", `{"defaultAction":"SCMP_ACT_ALLOW","syscalls":[{"names":["add_key"],"action":"SCMP_ACT_ERRNO"}]}`, false},
		{"default errno, named allow", `{"defaultAction":"SCMP_ACT_ERRNO","syscalls":[{"names":["read","add_key"],"action":"SCMP_ACT_ALLOW"}]}`, true},
		{"default errno, named log", `{"defaultAction":"SCMP_ACT_ERRNO","syscalls":[{"names":["add_key"],"action":"SCMP_ACT_LOG"}]}`, true},
		{"allowed under a condition", `{"defaultAction":"SCMP_ACT_ERRNO","syscalls":[{"names":["add_key"],"action":"SCMP_ACT_ALLOW","includes":{"caps":["CAP_SYS_ADMIN"]}}]}`, true},
		{"old name field", `{"defaultAction":"SCMP_ACT_ERRNO","syscalls":[{"name":"add_key","action":"SCMP_ACT_ALLOW"}]}`, true},
	} {
		if got := syscallAllowed(profileJSON(t, tt.profile), "add_key"); got != tt.want {
			t.Errorf("%s: allowed %v, want %v", tt.name, got, tt.want)
		}
	}
	if syscallAllowed(seccomp.DefaultProfile(), "add_key") {
		t.Error("Docker's default profile lets add_key through")
	}
	if !syscallAllowed(seccomp.DefaultProfile(), "read") {
		t.Error("Docker's default profile refuses read: the reading is wrong")
	}
}

// TestSeccompProfileFromTarget: the hardened reference's own profile file
// (the upstream default) is read from the target and refuses add_key; a
// file that is not a profile is an error, never "refused".
func TestSeccompProfileFromTarget(t *testing.T) {
	e := &Engine{target: &targets.Target{Path: filepath.Join("..", "fixtures", "targets", "hardened.yaml"),
		Docker: &targets.Docker{Seccomp: "seccomp-default.json"}}}
	p, err := e.seccompProfile()
	if err != nil {
		t.Fatalf("reading the hardened reference's profile: %v", err)
	}
	if syscallAllowed(p, "add_key") {
		t.Error("the hardened reference's profile lets add_key through")
	}
	bad := filepath.Join(t.TempDir(), "bad.json")
	if err := os.WriteFile(bad, []byte("{not json"), 0o644); err != nil {
		t.Fatal(err)
	}
	e.target.Docker.Seccomp = bad
	if _, err := e.seccompProfile(); err == nil {
		t.Error("a file that is not JSON read as a profile")
	}
	e.target.Docker.Seccomp = "default"
	if _, err := e.seccompProfile(); err == nil {
		t.Error("the default setting read as a profile file")
	}
}

// TestScratchLimitsFact: blocked only with a read-only root, no writable
// host storage and every harness tmpfs within size and inode limits.
func TestScratchLimitsFact(t *testing.T) {
	good := []targets.Tmpfs{{Path: "/tmp", Size: "16Mi", NrInodes: 4096}, {Path: "/scratch", Size: "32Mi", NrInodes: 4096}}
	for _, tt := range []struct {
		name     string
		edit     func(*runners.RuntimeView)
		noView   bool
		declared bool
		tmpfs    []targets.Tmpfs
		blocked  bool
		mentions string
	}{
		{name: "hardened", declared: true, tmpfs: good, blocked: true, mentions: "/tmp 16Mi/4096 inodes"},
		{name: "writable root", declared: true, tmpfs: good, edit: func(v *runners.RuntimeView) { v.ReadOnlyRootfs = false }, mentions: "root filesystem is writable"},
		{name: "writable host folder", declared: true, tmpfs: good, edit: func(v *runners.RuntimeView) {
			v.Mounts = append(v.Mounts, runners.Mount{Type: "volume", Source: "vol", Destination: "/data"})
		}, mentions: "writable volume vol at /data"},
		{name: "tmpfs without an inode limit", declared: true, tmpfs: []targets.Tmpfs{{Path: "/tmp", Size: "16Mi"}}, mentions: "kernel's default inode count"},
		{name: "tmpfs too large", declared: true, tmpfs: []targets.Tmpfs{{Path: "/tmp", Size: "2G", NrInodes: 10}}, mentions: "2048 MiB"},
		{name: "tmpfs too many inodes", declared: true, tmpfs: []targets.Tmpfs{{Path: "/tmp", Size: "1Mi", NrInodes: 2 << 20}}, mentions: "inodes"},
		{name: "tmpfs size unreadable", declared: true, tmpfs: []targets.Tmpfs{{Path: "/tmp", Size: "lots", NrInodes: 10}}, mentions: "no size"},
		{name: "not the harness's configuration", declared: false, mentions: "no view of its scratch limits"},
		{name: "no view", declared: true, tmpfs: good, noView: true, mentions: "no runtime view"},
		{name: "mounts unknown", declared: true, tmpfs: good, edit: func(v *runners.RuntimeView) { v.Unknown = []string{"mounts"} }, mentions: "could not tell its mounts"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			v := hardenedCarryView(t)
			if tt.edit != nil {
				tt.edit(v)
			}
			if tt.noView {
				v = nil
			}
			it := scratchLimitsFact(v, tt.declared, tt.tmpfs)
			want := probes.Outcome("")
			if tt.blocked {
				want = probes.Blocked
			}
			if it.Indicates != want || it.Source != "runtime" || it.Kind != "scratch-limits" {
				t.Errorf("%s/%s indicates %q, want runtime/scratch-limits %q: %s", it.Source, it.Kind, it.Indicates, want, it.Summary)
			}
			if !strings.Contains(it.Summary, tt.mentions) {
				t.Errorf("summary %q does not mention %q", it.Summary, tt.mentions)
			}
		})
	}
}

// profileJSON reads a seccomp profile as the engine reads a target's file.
func profileJSON(t *testing.T, s string) *seccomp.Seccomp {
	t.Helper()
	var p seccomp.Seccomp
	if err := json.Unmarshal([]byte(s), &p); err != nil {
		t.Fatalf("profile %s: %v", s, err)
	}
	return &p
}
