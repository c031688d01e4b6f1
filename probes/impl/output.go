package impl

import (
	"archive/zip"
	"bytes"
	"compress/gzip"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/sandcheck/sandcheck/output"
	"github.com/sandcheck/sandcheck/probes"
)

// The output probes plant one kind of hostile artifact each in the output
// folder the harness names (--output-dir) and report what they planted. They
// never decide their own outcome: whether the artifact reached the host in
// hostile form is for the release path to show, and the host's evidence
// (source output) settles it. So each reports inconclusive once it planted,
// and the grader reads the host's account.
func init() {
	register(map[string]Func{
		"output.symlink-out":    outputProbe("symlink-out", plantSymlinks),
		"output.traversal-name": outputProbe("traversal-name", plantTraversalNames),
		"output.special-files":  outputProbe("special-files", plantSpecialFiles),
		"output.oversize":       oversizeProbe,
		"output.archive-bomb":   outputProbe("archive-bomb", plantArchiveBombs),
		"output.secret-content": outputProbe("secret-content", plantSecret),
		"output.eicar":          outputProbe("eicar", plantEICAR),
		"output.active-content": outputProbe("active-content", plantActive),
	})
}

// oversizeBytes is what output.oversize writes: well past any sane per-file
// bound of a release path, well inside the hardened tmpfs.
const oversizeBytes = 4 << 20

// bombBytes is what output.archive-bomb compresses (zeros): a few MiB that
// become a few KiB, written by the probe as the small compressed file only.
const bombBytes = 16 << 20

type planter func(dir, prefix string, e ev) (planted []string, err error)

func outputProbe(name string, plant planter) Func {
	return func(ctx context.Context, p probes.Params) probes.Result {
		e := ev{}
		if p.OutputDir == "" {
			return result(probes.NotApplicable, "the target declares no output folder", e)
		}
		e.set("output_dir", p.OutputDir)
		prefix := probes.OutputArtifactPrefix(p.Token, "output."+name)
		planted, err := plant(p.OutputDir, prefix, e)
		e.setList("planted", planted)
		if err != nil {
			e.setErr("plant_", err)
		}
		if len(planted) == 0 {
			return inconclusive(fmt.Sprintf("planted nothing in %s; the release path has nothing to show", p.OutputDir), e)
		}
		return inconclusive(fmt.Sprintf("planted %d artifact(s) in %s; the host's view of the release decides", len(planted), p.OutputDir), e)
	}
}

func writeArtifact(dir, name string, b []byte) error {
	f, err := os.OpenFile(filepath.Join(dir, name), os.O_WRONLY|os.O_CREATE|os.O_EXCL|unix.O_NOFOLLOW, 0o644)
	if err != nil {
		return err
	}
	if _, err := f.Write(b); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// plantAll writes named artifacts and returns the names that were written
// and the first error.
func plantAll(dir string, files []struct {
	name string
	body []byte
}) ([]string, error) {
	var planted []string
	var first error
	for _, f := range files {
		if err := writeArtifact(dir, f.name, f.body); err != nil {
			if first == nil {
				first = fmt.Errorf("writing %q: %w", f.name, err)
			}
			continue
		}
		planted = append(planted, f.name)
	}
	return planted, first
}

// plantSymlinks leaves links that point outside the folder: one absolute, at
// a path on which a copier that followed it would create a file (the e2e
// test looks for it on the host), one climbing out with "..".
func plantSymlinks(dir, prefix string, e ev) ([]string, error) {
	var planted []string
	var first error
	for name, target := range map[string]string{
		prefix + ".abs": "/tmp/sandcheck-output-escape-" + prefix,
		prefix + ".up":  "../../../../../../etc/passwd",
	} {
		if err := os.Symlink(target, filepath.Join(dir, name)); err != nil {
			if first == nil {
				first = fmt.Errorf("symlink %s: %w", name, err)
			}
			continue
		}
		planted = append(planted, name+" -> "+target)
	}
	return planted, first
}

// plantTraversalNames leaves names that climb out of a folder when a
// consumer splits on backslashes, and a name with control characters (a
// newline and an escape) that forges lines in listings.
func plantTraversalNames(dir, prefix string, e ev) ([]string, error) {
	return plantAll(dir, []struct {
		name string
		body []byte
	}{
		{`..\..\..\` + prefix + ".win", []byte("traversal\n")},
		{prefix + ".ctl\n\x1b[2K", []byte("control characters\n")},
	})
}

// plantSpecialFiles leaves a fifo (a reader that opens it hangs) and, where
// mknod is allowed, a character device with /dev/null's numbers (harmless
// if opened, but a device node on a host folder all the same).
func plantSpecialFiles(dir, prefix string, e ev) ([]string, error) {
	var planted []string
	var first error
	if err := unix.Mkfifo(filepath.Join(dir, prefix+".fifo"), 0o644); err != nil {
		first = fmt.Errorf("mkfifo: %w", err)
	} else {
		planted = append(planted, prefix+".fifo")
	}
	if err := unix.Mknod(filepath.Join(dir, prefix+".dev"), unix.S_IFCHR|0o644, int(unix.Mkdev(1, 3))); err != nil {
		e.setErr("mknod_", err)
	} else {
		planted = append(planted, prefix+".dev")
	}
	return planted, first
}

// oversizeProbe writes one file past the release's per-file bound: 4 MiB,
// or more when the harness sets a larger bound (past the target's declared
// max_file_bytes, probes.Bounds.OutputFileBytes).
func oversizeProbe(ctx context.Context, p probes.Params) probes.Result {
	return outputProbe("oversize", oversizePlanter(int(probes.Bound(bounds(p).OutputFileBytes, oversizeBytes))))(ctx, p)
}

func oversizePlanter(n int) planter {
	return func(dir, prefix string, e ev) ([]string, error) {
		e.setInt("bytes", n)
		return plantAll(dir, []struct {
			name string
			body []byte
		}{{prefix + ".bin", bytes.Repeat([]byte("sandcheck oversize "), n/19+1)[:n]}})
	}
}

func plantArchiveBombs(dir, prefix string, e ev) ([]string, error) {
	var gz bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&gz, gzip.BestCompression)
	zeros := make([]byte, 1<<20)
	for range bombBytes / len(zeros) {
		zw.Write(zeros)
	}
	zw.Close()
	var zb bytes.Buffer
	z := zip.NewWriter(&zb)
	w, err := z.Create(prefix + ".zeros")
	if err != nil {
		return nil, err
	}
	for range bombBytes / len(zeros) {
		w.Write(zeros)
	}
	z.Close()
	e.setf("expands", "%d bytes each", bombBytes)
	e.setf("compressed", "gzip %d bytes, zip %d bytes", gz.Len(), zb.Len())
	return plantAll(dir, []struct {
		name string
		body []byte
	}{{prefix + ".gz", gz.Bytes()}, {prefix + ".zip", zb.Bytes()}})
}

// plantSecret writes values in the shapes of an AWS access key and a GitHub
// token, made from the probe's token: honeytoken-shaped, never real.
func plantSecret(dir, prefix string, e ev) ([]string, error) {
	up := strings.ToUpper(strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' {
			return r
		}
		return -1
	}, prefix))
	key := "AKIA" + (up + "SANDCHECKHONEY0000000")[:16]
	gh := "ghp_" + (strings.ToLower(up) + strings.Repeat("0", 36))[:36]
	return plantAll(dir, []struct {
		name string
		body []byte
	}{{prefix + ".env", []byte("AWS_ACCESS_KEY_ID=" + key + "\nGITHUB_TOKEN=" + gh + "\n")}})
}

func plantEICAR(dir, prefix string, e ev) ([]string, error) {
	return plantAll(dir, []struct {
		name string
		body []byte
	}{{prefix + ".com", output.EICAR()}})
}

func plantActive(dir, prefix string, e ev) ([]string, error) {
	elf := append([]byte("\x7fELF\x02\x01\x01\x00"), make([]byte, 56)...)
	return plantAll(dir, []struct {
		name string
		body []byte
	}{
		{prefix + ".html", []byte("<!doctype html><html><body><script>fetch('/steal?c='+document.cookie)</script></body></html>\n")},
		{prefix + ".svg", []byte(`<svg xmlns="http://www.w3.org/2000/svg" onload="alert(document.domain)"><circle r="1"/></svg>` + "\n")},
		{prefix + ".elf", elf},
	})
}
