package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sandcheck/sandcheck/provenance"
)

func writeRun(t *testing.T, dir, runID, sbom, digest string) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if digest == "" {
		digest = provenance.Digest([]byte(sbom))
	}
	rec := fmt.Sprintf(`{"run_id":%q,"target":{"name":"t"},"provenance":{"image_ref":"r","digest":"sha256:aa","pinned":true,
		"signature":{"verified":true,"key_fingerprint":"k","tlog_required":false},
		"sbom":{"path":"sbom.spdx.json","digest":%q,"format":"spdx-json","packages":[]}}}`, runID, digest)
	if err := os.WriteFile(filepath.Join(dir, "run.json"), []byte(rec), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "sbom.spdx.json"), []byte(sbom), 0o644); err != nil {
		t.Fatal(err)
	}
}

const spdxBusybox = `{"spdxVersion":"SPDX-2.3","packages":[{"SPDXID":"SPDXRef-Package-1","name":"busybox","versionInfo":"1.35.0"}]}`

func TestFindRuns(t *testing.T) {
	root := t.TempDir()
	writeRun(t, filepath.Join(root, "a"), "run-a", spdxBusybox, "")
	writeRun(t, filepath.Join(root, "b"), "run-b", `{"spdxVersion":"SPDX-2.3","packages":[{"SPDXID":"p","name":"curl","versionInfo":"7.88.1"}]}`, "")
	os.MkdirAll(filepath.Join(root, "c"), 0o755)
	os.WriteFile(filepath.Join(root, "c", "run.json"), []byte(`{"run_id":"run-c"}`), 0o644) // no provenance: not counted

	hits, scanned, err := findRuns(root, "BusyBox", "")
	if err != nil || scanned != 2 || len(hits) != 1 || !strings.Contains(hits[0], "run-a") || !strings.Contains(hits[0], "busybox@1.35.0") {
		t.Fatalf("busybox: %q, %d scanned, %v", hits, scanned, err)
	}
	if hits, _, err := findRuns(root, "busybox", "1.36.0"); err != nil || len(hits) != 0 {
		t.Fatalf("busybox@1.36.0: %q, %v", hits, err)
	}
	if hits, _, err := findRuns(root, "curl", "7.88.1"); err != nil || len(hits) != 1 || !strings.Contains(hits[0], "run-b") {
		t.Fatalf("curl@7.88.1: %q, %v", hits, err)
	}

	// A malformed SBOM, or one that is not the SBOM the record names, is a
	// harness error (exit 2), never "not found".
	bad := t.TempDir()
	writeRun(t, filepath.Join(bad, "x"), "run-x", `{"bomFormat":"CycloneDX"}`, "")
	if _, _, err := findRuns(bad, "busybox", ""); !errors.Is(err, provenance.ErrMalformed) {
		t.Fatalf("malformed SBOM: %v", err)
	}
	swapped := t.TempDir()
	writeRun(t, filepath.Join(swapped, "x"), "run-x", spdxBusybox, "sha256:00")
	if _, _, err := findRuns(swapped, "busybox", ""); err == nil || !strings.Contains(err.Error(), "the record says sha256:00") {
		t.Fatalf("SBOM digest mismatch: %v", err)
	}
}

func TestVerifyExit(t *testing.T) {
	var ee *exitError
	if err := verifyExit(fmt.Errorf("x: %w", provenance.ErrFailed)); !errors.As(err, &ee) || ee.code != exitFail {
		t.Fatalf("ErrFailed: %v", err)
	}
	if err := verifyExit(fmt.Errorf("%w signature", provenance.ErrMalformed)); !errors.As(err, &ee) || ee.code != exitHarness {
		t.Fatalf("ErrMalformed: %v", err)
	}
	if err := verifyExit(errors.New("connection refused")); !errors.As(err, &ee) || ee.code != exitHarness {
		t.Fatalf("other: %v", err)
	}
}
