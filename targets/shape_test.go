package targets

import (
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"
)

const minimal = "schema: sandcheck.dev/target/v1\nname: x\nrunner: docker\nimage: i\nprofile: high-risk-code\ndocker:\n  runtime: runc\n  network: none\n"

// TestDeepNestingIsBounded: 100k levels in a 200 KB file took the YAML parser
// 15 GB and 50 s before the shape check; now it is refused at once.
func TestDeepNestingIsBounded(t *testing.T) {
	for name, src := range map[string]string{
		"flow":  minimal + "description: " + strings.Repeat("[", 100000) + strings.Repeat("]", 100000) + "\n",
		"block": minimal + "labels:\n" + strings.Repeat("- ", 100000) + "x\n",
	} {
		var before runtime.MemStats
		runtime.ReadMemStats(&before)
		t0 := time.Now()
		_, err := Parse("t.yaml", []byte(src))
		var after runtime.MemStats
		runtime.ReadMemStats(&after)
		if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "t.yaml:") || !strings.Contains(err.Error(), "nested deeper than 64 levels") {
			t.Errorf("%s: got %v", name, err)
		}
		if d, mb := time.Since(t0), (after.TotalAlloc-before.TotalAlloc)>>20; d > 2*time.Second || mb > 64 {
			t.Errorf("%s: took %s and %d MB", name, d, mb)
		}
	}
}

// TestMultiDocumentTargetIsRefused: before, only the first document ran.
func TestMultiDocumentTargetIsRefused(t *testing.T) {
	_, err := Parse("t.yaml", []byte(minimal+"---\n"+strings.Replace(minimal, "runc", "runsc", 1)))
	if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "t.yaml: holds 2 YAML documents") {
		t.Fatalf("got %v", err)
	}
	if _, err := Parse("t.yaml", []byte("---\n"+minimal)); err != nil {
		t.Fatalf("one document after a marker: %v", err)
	}
}

// TestEmptyTargetSaysSo: before, an empty file said only "EOF".
func TestEmptyTargetSaysSo(t *testing.T) {
	p := filepath.Join(t.TempDir(), "empty.yaml")
	for _, src := range []string{"", "\n\n", "# just a comment\n", "---\n"} {
		if err := os.WriteFile(p, []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
		_, err := Load(p)
		if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), p+": the file is empty") {
			t.Errorf("%q: got %v", src, err)
		}
	}
}

// TestRunDirEscapeIsRefused: ${SANDCHECK_RUN_DIR}/../../etc used to resolve
// to /etc and be mounted.
func TestRunDirEscapeIsRefused(t *testing.T) {
	for src, ok := range map[string]bool{
		"${SANDCHECK_RUN_DIR}/../../etc": false,
		"${SANDCHECK_RUN_DIR}/a/../../x": false,
		"${SANDCHECK_RUN_DIR}/..":        false,
		"${SANDCHECK_RUN_DIR}x":          false,
		"/x/${SANDCHECK_RUN_DIR}":        false,
		"${SANDCHECK_RUN_DIR}/a/../b":    true,
		"${SANDCHECK_RUN_DIR}/home":      true,
		"${SANDCHECK_RUN_DIR}":           true,
		"../fixtures":                    true, // a host path next to the target: allowed, graded
	} {
		_, err := Parse("t.yaml", []byte(minimal+"  mounts:\n    - {source: \""+src+"\", target: /m}\n"))
		if ok != (err == nil) {
			t.Errorf("%s: got %v", src, err)
		}
		if err != nil && !strings.Contains(err.Error(), "$.docker.mounts[0].source") {
			t.Errorf("%s: error does not name the field: %v", src, err)
		}
	}
	tg, err := Parse(filepath.Join(t.TempDir(), "t.yaml"), []byte(minimal+"  mounts:\n    - {source: \"${SANDCHECK_RUN_DIR}/a/../b\", target: /m}\n"))
	if err != nil {
		t.Fatal(err)
	}
	run := t.TempDir()
	ms, err := tg.ResolveMounts(run)
	if err != nil || ms[0].Source != filepath.Join(run, "b") {
		t.Fatalf("resolved %v, %v", ms, err)
	}
	tg.Docker.Mounts[0].Source = "${SANDCHECK_RUN_DIR}/../../etc" // as a caller skipping Parse would
	if _, err := tg.ResolveMounts(run); err == nil || !strings.Contains(err.Error(), "leaves the run's folder") {
		t.Fatalf("ResolveMounts: %v", err)
	}
}

func TestContainerNetworkIsRefused(t *testing.T) {
	_, err := Parse("t.yaml", []byte(strings.Replace(minimal, "network: none", "network: \"container:abc\"", 1)))
	if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "t.yaml:8:12: $.docker.network: \"container:abc\" joins another container's network namespace") {
		t.Fatalf("got %v", err)
	}
}
