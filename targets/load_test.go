package targets

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestFixturesLoad(t *testing.T) {
	files, err := filepath.Glob("../fixtures/targets/*.yaml")
	if err != nil || len(files) < 3 {
		t.Fatalf("want at least 3 fixture targets, got %v (%v)", files, err)
	}
	for _, f := range files {
		tg, err := Load(f)
		if err != nil {
			t.Errorf("%s: %v", f, err)
			continue
		}
		if !strings.HasPrefix(tg.Digest, "sha256:") || (tg.Docker == nil && tg.Section == nil && tg.Command == nil && tg.Gateway == nil && tg.OpenSandbox == nil) {
			t.Errorf("%s: digest %q docker %v", f, tg.Digest, tg.Docker)
		}
	}
}

func TestErrorsNameFileLineAndField(t *testing.T) {
	cases := []struct {
		name, src, want string
	}{
		{"unknown field", "schema: sandcheck.dev/target/v1\nname: x\nrunner: docker\nimage: i\nprofile: high-risk-code\ndocker:\n  runtime: runc\n  network: none\n  bogus: 1\n", "t.yaml:9:"},
		{"bad runtime", "schema: sandcheck.dev/target/v1\nname: x\nrunner: docker\nimage: i\nprofile: high-risk-code\ndocker:\n  runtime: kata\n  network: none\n", "t.yaml:7:12: $.docker.runtime: \"kata\" is not one of"},
		{"bad profile", "schema: sandcheck.dev/target/v1\nname: x\nrunner: docker\nimage: i\nprofile: yolo\ndocker:\n  runtime: runc\n  network: none\n", "t.yaml:5:10: $.profile"},
		{"wrong schema", "schema: v0\nname: x\nrunner: docker\nimage: i\nprofile: high-risk-code\ndocker:\n  runtime: runc\n  network: none\n", "t.yaml:1:9: $.schema"},
		{"container pid", "schema: sandcheck.dev/target/v1\nname: x\nrunner: docker\nimage: i\nprofile: high-risk-code\ndocker:\n  runtime: runc\n  network: none\n  pid: \"container:x\"\n", "$.docker.pid"},
		{"bad tmpfs size", "schema: sandcheck.dev/target/v1\nname: x\nrunner: docker\nimage: i\nprofile: high-risk-code\ndocker:\n  runtime: runc\n  network: none\n  tmpfs:\n    - {path: /tmp, size: lots}\n", "$.docker.tmpfs[0].size"},
		{"bad nr_inodes", "schema: sandcheck.dev/target/v1\nname: x\nrunner: docker\nimage: i\nprofile: high-risk-code\ndocker:\n  runtime: runc\n  network: none\n  tmpfs:\n    - {path: /tmp, size: 1Mi, nr_inodes: -4}\n", "$.docker.tmpfs[0].nr_inodes"},
		{"bad shm size", "schema: sandcheck.dev/target/v1\nname: x\nrunner: docker\nimage: i\nprofile: high-risk-code\ndocker:\n  runtime: runc\n  network: none\n  shm_size: huge\n", "t.yaml:9:13: $.docker.shm_size"},
		{"unknown ulimit", "schema: sandcheck.dev/target/v1\nname: x\nrunner: docker\nimage: i\nprofile: high-risk-code\ndocker:\n  runtime: runc\n  network: none\n  ulimits:\n    - {name: files, soft: 1, hard: 1}\n", "$.docker.ulimits[0].name: \"files\" is not one of"},
		{"ulimit soft above hard", "schema: sandcheck.dev/target/v1\nname: x\nrunner: docker\nimage: i\nprofile: high-risk-code\ndocker:\n  runtime: runc\n  network: none\n  ulimits:\n    - {name: cpu, soft: 9, hard: 2}\n", "$.docker.ulimits[0]: soft 9 and hard 2"},
		{"bad output release", "schema: sandcheck.dev/target/v1\nname: x\nrunner: docker\nimage: i\nprofile: high-risk-code\ndocker:\n  runtime: runc\n  network: none\noutput:\n  path: /out\n  release: copy\n", "$.output.release: \"copy\" is not one of"},
		{"gated output without a total bound", "schema: sandcheck.dev/target/v1\nname: x\nrunner: docker\nimage: i\nprofile: high-risk-code\ndocker:\n  runtime: runc\n  network: none\noutput:\n  path: /out\n  release: gated\n", "$.output.max_total_bytes"},
		{"gated output past the stream bound", "schema: sandcheck.dev/target/v1\nname: x\nrunner: docker\nimage: i\nprofile: high-risk-code\ndocker:\n  runtime: runc\n  network: none\noutput:\n  path: /out\n  release: gated\n  max_total_bytes: 1Mi\n", "$.output.max_total_bytes"},
		{"relative output path", "schema: sandcheck.dev/target/v1\nname: x\nrunner: docker\nimage: i\nprofile: high-risk-code\ndocker:\n  runtime: runc\n  network: none\noutput:\n  path: out\n  release: bind\n", "$.output.path"},
		{"not yaml", "schema: [\n", "t.yaml:"},
		{"unknown runner", "schema: sandcheck.dev/target/v1\nname: x\nrunner: lxc\nimage: i\nprofile: high-risk-code\n", "$.runner: \"lxc\""},
		{"bad egress", "schema: sandcheck.dev/target/v1\nname: x\nrunner: docker\nimage: i\nprofile: package-build\ndocker:\n  runtime: runc\n  network: harness\n  egress: mirrors\n", "t.yaml:9:11: $.docker.egress: \"mirrors\" is not one of"},
		{"egress without network", "schema: sandcheck.dev/target/v1\nname: x\nrunner: docker\nimage: i\nprofile: package-build\ndocker:\n  runtime: runc\n  network: none\n  egress: mirror-only\n", "t.yaml:9:11: $.docker.egress: \"mirror-only\" needs a network"},
		{"reserved env", "schema: sandcheck.dev/target/v1\nname: x\nrunner: docker\nimage: i\nprofile: high-risk-code\ndocker:\n  runtime: runc\n  network: none\n  env: {SANDCHECK_TOKEN: x}\n", "reserved"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := Parse("t.yaml", []byte(c.src))
			if err == nil {
				t.Fatal("want an error")
			}
			if !errors.Is(err, ErrInvalid) {
				t.Errorf("error does not wrap ErrInvalid: %v", err)
			}
			if !strings.Contains(err.Error(), c.want) {
				t.Errorf("error %q does not contain %q", err, c.want)
			}
		})
	}
}

func TestParseSize(t *testing.T) {
	for in, want := range map[string]int64{"4096": 4096, "16Mi": 16 << 20, "512M": 512 << 20, "1G": 1 << 30, "8k": 8 << 10} {
		if got, err := ParseSize(in); err != nil || got != want {
			t.Errorf("ParseSize(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"", "-1", "1T", "12.5M", "99999999999999999999G"} {
		if _, err := ParseSize(in); err == nil {
			t.Errorf("ParseSize(%q) succeeded", in)
		}
	}
}

func TestResolveMountsCreatesOnlyInsideRunDir(t *testing.T) {
	dir := t.TempDir()
	tg := &Target{Path: filepath.Join(dir, "t.yaml"), Docker: &Docker{Mounts: []Mount{{Source: "${SANDCHECK_RUN_DIR}/share", Target: "/s"}}}}
	run := filepath.Join(dir, "run")
	ms, err := tg.ResolveMounts(run)
	if err != nil || len(ms) != 1 || ms[0].Source != filepath.Join(run, "share") {
		t.Fatalf("ResolveMounts = %v, %v", ms, err)
	}
	if fi, err := os.Stat(ms[0].Source); err != nil || !fi.IsDir() {
		t.Fatalf("source not created: %v", err)
	}
	tg.Docker.Mounts[0].Source = "missing"
	if _, err := tg.ResolveMounts(run); err == nil {
		t.Fatal("a missing source outside the run dir must be an error")
	}
}

func TestEgressProfile(t *testing.T) {
	for _, c := range []struct{ network, egress, want string }{
		{"none", "", EgressNone},
		{"harness", "", EgressOpen},
		{"harness", EgressMirrorOnly, EgressMirrorOnly},
		{"none", EgressNone, EgressNone},
	} {
		tg := &Target{Docker: &Docker{Network: c.network, Egress: c.egress}}
		if got := tg.EgressProfile(); got != c.want {
			t.Errorf("network %q egress %q: EgressProfile() = %q, want %q", c.network, c.egress, got, c.want)
		}
	}
}

// A tmpfs without a size validates (Docker mounts one so; the probes grade
// it), while one whose size is not a size, or zero, does not.
func TestSizelessTmpfsValidates(t *testing.T) {
	base := "schema: sandcheck.dev/target/v1\nname: x\nrunner: docker\nimage: i\nprofile: high-risk-code\ndocker:\n  runtime: runc\n  network: none\n  tmpfs:\n"
	tg, err := Parse("t.yaml", []byte(base+"    - {path: /work}\n"))
	if err != nil {
		t.Fatalf("a size-less tmpfs is refused: %v", err)
	}
	if l := tg.DeclaredLimits(); l.TmpfsBytes != 0 {
		t.Errorf("a size-less tmpfs declares %d bytes, want none", l.TmpfsBytes)
	}
	if _, err := Parse("t.yaml", []byte(base+"    - {path: /work, size: \"0\"}\n")); err == nil || !strings.Contains(err.Error(), "$.docker.tmpfs[0].size") {
		t.Errorf("size 0: %v, want an error naming $.docker.tmpfs[0].size", err)
	}
}
