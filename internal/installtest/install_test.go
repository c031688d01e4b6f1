// Package installtest proves that sandcheck installs the way a Go user
// installs a tool: `go install github.com/sandcheck/sandcheck/cmd/sandcheck@VERSION`
// through a module proxy, outside any checkout, and that the binary it makes
// validates and runs a target with nothing beside it (the probe it delivers
// is the one embedded in it).
//
// The proxy is a file-based one (GOPROXY=file://…) holding this checkout's
// HEAD zipped at a pseudo-version, in front of the machine's module cache for
// the dependencies: the go command takes the module exactly as it would from
// a public proxy (go.mod checks, no replace directives allowed, -mod=mod).
package installtest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/mod/module"
	"golang.org/x/mod/zip"
)

const modPath = "github.com/sandcheck/sandcheck"

func TestGoInstallRunsWithNothingBeside(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the CLI from a module proxy: not in -short")
	}
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	rev := strings.TrimSpace(run(t, root, nil, "git", "rev-parse", "HEAD"))
	when := strings.TrimSpace(run(t, root, nil, "git", "show", "-s", "--format=%ct", "HEAD"))
	var secs int64
	if _, err := fmt.Sscan(when, &secs); err != nil {
		t.Fatalf("commit time %q: %v", when, err)
	}
	stamp := time.Unix(secs, 0).UTC()
	version := module.PseudoVersion("v0", "", stamp, rev[:12])

	// The module as a proxy serves it: list, .info, .mod and .zip.
	tmp := t.TempDir()
	at := filepath.Join(tmp, "proxy", modPath, "@v")
	if err := os.MkdirAll(at, 0o755); err != nil {
		t.Fatal(err)
	}
	// HEAD's tracked files, exported with git archive (which works in a
	// worktree too), zipped by the go command's own rules (no nested
	// modules, size limits, file name checks).
	src := filepath.Join(tmp, "src")
	if err := os.MkdirAll(src, 0o755); err != nil {
		t.Fatal(err)
	}
	run(t, root, nil, "bash", "-c", `git archive "$1" | tar -x -C "$2"`, "archive", rev, src)
	var z bytes.Buffer
	if err := zip.CreateFromDir(&z, module.Version{Path: modPath, Version: version}, src); err != nil {
		t.Fatalf("zipping HEAD as %s@%s: %v", modPath, version, err)
	}
	gomod := run(t, root, nil, "git", "show", rev+":go.mod")
	info, _ := json.Marshal(map[string]any{"Version": version, "Time": stamp.Format(time.RFC3339)})
	for name, b := range map[string][]byte{
		"list":            []byte(version + "\n"),
		version + ".info": info,
		version + ".mod":  []byte(gomod),
		version + ".zip":  z.Bytes(),
	} {
		if err := os.WriteFile(filepath.Join(at, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}

	// go install from an empty folder, into an empty GOPATH. Dependencies
	// come from the machine's module cache served as a second proxy (an
	// empty cache would fetch and unpack every dependency: minutes), and the
	// module's own extracted copy is removed from that cache afterwards.
	modcache := strings.TrimSpace(run(t, root, nil, "go", "env", "GOMODCACHE"))
	t.Cleanup(func() { removeModule(t, modcache, version) })
	empty := filepath.Join(tmp, "empty")
	bin := filepath.Join(tmp, "bin")
	for _, d := range []string{empty, bin} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	goEnv := []string{
		"GOPROXY=file://" + filepath.Join(tmp, "proxy") + ",file://" + filepath.Join(modcache, "cache", "download"),
		"GOSUMDB=off", "GOFLAGS=" + strings.TrimSpace(os.Getenv("GOFLAGS")+" -mod=mod"), "GOWORK=off", "GOTOOLCHAIN=local",
		"GOPATH=" + filepath.Join(tmp, "gopath"), "GOMODCACHE=" + modcache, "GOBIN=" + bin,
	}
	start := time.Now()
	run(t, empty, goEnv, "go", "install", modPath+"/cmd/sandcheck@"+version)
	t.Logf("go install %s@%s: %s", modPath, version, time.Since(start).Round(time.Second))
	exe := filepath.Join(bin, "sandcheck")
	out := run(t, empty, nil, exe, "version")
	t.Logf("sandcheck version: %s", strings.TrimSpace(out))

	// The hardened reference and the seccomp profile it names, copied into a
	// folder with no checkout, no probe binary and an empty cache.
	work := filepath.Join(tmp, "work")
	if err := os.MkdirAll(work, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"hardened.yaml", "seccomp-default.json"} {
		b, err := os.ReadFile(filepath.Join(root, "fixtures", "targets", f))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(work, f), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	runEnv := []string{"SANDCHECK_BIN=", "XDG_CACHE_HOME=" + filepath.Join(tmp, "cache")}
	run(t, work, runEnv, exe, "targets", "validate", "hardened.yaml")

	if os.Geteuid() != 0 {
		t.Skip("running the target needs root (CI runs this as root)")
	}
	if err := exec.Command("docker", "info").Run(); err != nil {
		t.Skipf("running the target needs the Docker engine (CI starts it): %v", err)
	}
	run(t, work, runEnv, exe, "run", "--target", "hardened.yaml", "--out-dir", "out", "--quiet")
	for _, f := range []string{"run.json", "junit.xml"} {
		if _, err := os.Stat(filepath.Join(work, "out", f)); err != nil {
			t.Errorf("the run wrote no %s: %v", f, err)
		}
	}
	probes, err := filepath.Glob(filepath.Join(tmp, "cache", "sandcheck", "probe", "*", "sandcheck-probe"))
	if err != nil || len(probes) != 1 {
		t.Errorf("the run did not use the embedded probe written to its cache: found %v (%v)", probes, err)
	}
}

// run runs argv in dir with env added to this process's environment and
// returns its standard output; a failure stops the test with everything the
// command printed.
func run(t *testing.T, dir string, env []string, argv ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s (in %s): %v\nstdout:\n%s\nstderr:\n%s", strings.Join(argv, " "), dir, err, tail(stdout.String()), tail(stderr.String()))
	}
	return stdout.String()
}

func tail(s string) string {
	if len(s) > 8000 {
		return "…" + s[len(s)-8000:]
	}
	return s
}

// removeModule deletes what go install unpacked of this module's
// pseudo-version from the shared module cache (read-only files, as the go
// command leaves them); nothing else of the cache is touched.
func removeModule(t *testing.T, modcache, version string) {
	for _, p := range []string{
		filepath.Join(modcache, modPath+"@"+version),
		filepath.Join(modcache, "cache", "download", modPath, "@v"),
	} {
		_ = filepath.WalkDir(p, func(path string, d fs.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				_ = os.Chmod(path, 0o755)
			}
			return nil
		})
		if p == filepath.Join(modcache, "cache", "download", modPath, "@v") {
			for _, ext := range []string{".info", ".mod", ".zip", ".ziphash", ".lock"} {
				_ = os.Remove(filepath.Join(p, version+ext))
			}
			continue
		}
		if err := os.RemoveAll(p); err != nil {
			t.Logf("removing %s from the module cache: %v", p, err)
		}
	}
}
