package reports

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"testing"

	"github.com/sandcheck/sandcheck/evidence"
)

// TestSARIFFingerprintsStableAcrossRuns takes a stored weak run, makes a
// second one from it that differs only in its per-run values (another run
// ID, run folder and set of random tokens, as the next scheduled run of the
// same target has), and requires both to carry the same set of SARIF
// fingerprints, while the second run really differs in text.
func TestSARIFFingerprintsStableAcrossRuns(t *testing.T) {
	raw, err := os.ReadFile("testdata/full-weak.run.json")
	if err != nil {
		t.Fatal(err)
	}
	other := bytes.ReplaceAll(raw, []byte("20261201t145407-461a3fd8"), []byte("20261202t091500-0badcafe"))
	other = bytes.ReplaceAll(other, []byte("20261201t145"), []byte("20261202t091"))
	other = regexp.MustCompile(`sandcheck-run-[0-9]+`).ReplaceAll(other, []byte("sandcheck-run-1234567"))
	n := 0
	other = regexp.MustCompile(`\bsc[0-9a-f]{12}\b`).ReplaceAllFunc(other, func([]byte) []byte {
		n++
		return []byte(fmt.Sprintf("sc%012x", n))
	})
	if bytes.Equal(raw, other) || n == 0 {
		t.Fatal("the second run does not differ from the first: the test proves nothing")
	}
	first, second := fingerprints(t, raw), fingerprints(t, other)
	if len(first) == 0 {
		t.Fatal("the weak run opens no alert")
	}
	for fp := range first {
		if !second[fp] {
			t.Errorf("fingerprint only in the first run: %s", fp)
		}
	}
	for fp := range second {
		if !first[fp] {
			t.Errorf("fingerprint only in the second run: %s", fp)
		}
	}
}

func fingerprints(t *testing.T, run []byte) map[string]bool {
	t.Helper()
	path := t.TempDir() + "/run.json"
	if err := os.WriteFile(path, run, 0o644); err != nil {
		t.Fatal(err)
	}
	rec := loadRecord(t, path, false)
	var b bytes.Buffer
	if err := (SARIF{}).Write(&b, rec); err != nil {
		t.Fatal(err)
	}
	var log struct {
		Runs []struct {
			Results []struct {
				PartialFingerprints map[string]string `json:"partialFingerprints"`
			} `json:"results"`
		} `json:"runs"`
	}
	if err := json.Unmarshal(b.Bytes(), &log); err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	for _, r := range log.Runs[0].Results {
		out[r.PartialFingerprints["sandcheckTargetFinding/v1"]] = true
	}
	return out
}

// stableText replaces per-run values, and nothing else.
func TestStableText(t *testing.T) {
	rec := &evidence.Record{RunID: "20261203t103508-68d6e947"}
	for in, want := range map[string]string{
		"mounts host path /tmp/sandcheck-run-1112200651/agent at /x":     "mounts host path <run-folder>/agent at /x",
		"handed out ..\\..\\sc1639d7374be7.traversal-name.win":           "handed out ..\\..\\<token>.traversal-name.win",
		"network sandcheck-20261203t103 of run 20261203t103508-68d6e947": "network sandcheck-<run> of run <run>",
		"probe secrets.env saw scx and sc12345 and /tmp/sandcheck-runs":  "probe secrets.env saw scx and sc12345 and /tmp/sandcheck-runs",
		"the broker still served the task's token (sha256 723b0cd0d89c8d882a014d908771279cc880382666933389204497abfc28a9d0) 7337ms after the harness revoked it; the target's bound is 5000ms": "the broker still served the task's token (sha256 <token>) <measured>ms after the harness revoked it; the target's bound is 5000ms",
		"replayed the task's token (sha256 723b0cd0d89c8d88) and": "replayed the task's token (sha256 <token>) and",
		"image sha256 723b0cd0d89c8d88 is unsigned":               "image sha256 723b0cd0d89c8d88 is unsigned",
	} {
		if got := stableText(rec, in); got != want {
			t.Errorf("stableText(%q) = %q, want %q", in, got, want)
		}
	}
}
