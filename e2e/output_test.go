package e2e

import (
	"crypto/sha256"
	"encoding/hex"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sandcheck/sandcheck/evidence"
	"github.com/sandcheck/sandcheck/probes"
)

// escapeGlob matches the files output.symlink-out's absolute links point
// at: a copy-out that followed a link to write would create one on the host.
const escapeGlob = "/tmp/sandcheck-output-escape-*"

// TestOutputReleasePath runs the output family against the three
// references. Weak (a bind-mounted folder released as-is) lets every
// artifact through; both hardened ones release through the gate, which
// withholds every one. In every run the host never follows a link and
// never gets a file outside the run's folder; in gated runs the release
// folder holds only regular files the record lists, with the digests it
// records.
func TestOutputReleasePath(t *testing.T) {
	for _, tc := range []struct {
		target string
		want   probes.Outcome
		code   int
	}{
		{"weak.yaml", probes.Escaped, 1},
		{"hardened.yaml", probes.Blocked, 0},
		{"hardened-gvisor.yaml", probes.Blocked, 0},
	} {
		t.Run(tc.target, func(t *testing.T) {
			before, _ := filepath.Glob(escapeGlob)
			r := sandcheck(t, "run", "--target", "fixtures/targets/"+tc.target, "--probes", "output.*", "--quiet")
			rec := r.mustRecord(t)
			if r.code != tc.code {
				t.Errorf("exit code %d, want %d\n%s\n%s", r.code, tc.code, r.stdout, r.stderr)
			}
			n := 0
			for i, res := range rec.Results {
				if !strings.HasPrefix(res.Probe, "output.") {
					continue
				}
				n++
				if eff := rec.Effective(i); eff != tc.want {
					t.Errorf("%s on %s: effective %s, want %s (%+v)", res.Probe, tc.target, eff, tc.want, res.Evidence)
				}
				it, ok := hostItem(res, evidence.SourceOutput, map[probes.Outcome]string{probes.Escaped: "output-released", probes.Blocked: "output-withheld"}[tc.want])
				if !ok || it.Indicates != tc.want {
					t.Errorf("%s: no host item of the release showing %s: %+v", res.Probe, tc.want, res.Evidence)
				}
			}
			if n != 8 {
				t.Errorf("%d output results, want 8", n)
			}
			after, _ := filepath.Glob(escapeGlob)
			if len(after) > len(before) {
				t.Errorf("a link planted in the output folder was followed on the host: %v", after)
			}
			if len(rec.Outputs) == 0 {
				t.Fatal("the record lists no output release")
			}
			checkReleaseFolder(t, r.out, rec)
		})
	}
}

// checkReleaseFolder walks the run's folder (never following links) and
// checks every released file against the record: regular, inside the
// release folder, listed with its digest, and not flagged.
func checkReleaseFolder(t *testing.T, out string, rec *evidence.Record) {
	t.Helper()
	listed := map[string]string{} // host path -> sha256
	for _, o := range rec.Outputs {
		rel := o.Release
		if rel.Mode != "gated" {
			continue
		}
		if !strings.HasPrefix(rel.Dest, filepath.Join(out, "released")+"/") {
			t.Errorf("release folder %s is outside the run folder %s", rel.Dest, out)
		}
		for _, a := range rel.Artifacts {
			if a.Released && len(a.Flags) > 0 {
				t.Errorf("flagged artifact released: %+v", a)
			}
			if a.Released && a.Kind == "file" {
				listed[filepath.Join(rel.Dest, a.Path)] = a.SHA256
			}
			if a.Kind == "file" && a.SHA256 == "" && !a.Released && a.Read > 0 {
				t.Errorf("artifact %s read without a digest", a.Path)
			}
		}
	}
	err := filepath.WalkDir(filepath.Join(out, "released"), func(p string, d fs.DirEntry, err error) error {
		if os.IsNotExist(err) && p == filepath.Join(out, "released") {
			return filepath.SkipDir
		}
		if err != nil {
			return err
		}
		if d.IsDir() {
			return nil
		}
		if !d.Type().IsRegular() {
			t.Errorf("%s in the release folder is %s, not a regular file", p, d.Type())
			return nil
		}
		want, ok := listed[p]
		if !ok {
			t.Errorf("%s is in the release folder but the record does not list it as released", p)
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		sum := sha256.Sum256(b)
		if got := "sha256:" + hex.EncodeToString(sum[:]); got != want {
			t.Errorf("%s: digest %s, record says %s", p, got, want)
		}
		if strings.Contains(string(b), "root:x:0:0") {
			t.Errorf("%s holds a passwd file: a link was followed", p)
		}
		return nil
	})
	if err != nil {
		t.Errorf("walking the release folder: %v", err)
	}
}
