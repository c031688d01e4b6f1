package output

import (
	"archive/tar"
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// FuzzReadTarStaysInside: any stream a box hands over lands only inside the release
// folder, within the limits, and never panics.
func FuzzReadTarStaysInside(f *testing.F) {
	var b bytes.Buffer
	tw := tar.NewWriter(&b)
	for _, e := range []struct{ name, body string }{{"report.txt", "hello"}, {"../escape", "x"}, {"a/b/c", "y"}} {
		tw.WriteHeader(&tar.Header{Name: e.name, Mode: 0o644, Size: int64(len(e.body)), Typeflag: tar.TypeReg})
		tw.Write([]byte(e.body))
	}
	tw.WriteHeader(&tar.Header{Name: "link", Linkname: "/etc/passwd", Typeflag: tar.TypeSymlink})
	tw.Close()
	f.Add(b.Bytes())
	f.Add([]byte{})
	lim := Limits{MaxFiles: 16, MaxFileBytes: 4096, MaxTotalBytes: 16384, MaxExpandBytes: 1 << 20, MaxRatio: 100}
	f.Fuzz(func(t *testing.T, data []byte) {
		parent := t.TempDir()
		dest := filepath.Join(parent, "release")
		if err := os.Mkdir(dest, 0o755); err != nil {
			t.Fatal(err)
		}
		rel := ReadTar(bytes.NewReader(data), dest, lim)
		if rel == nil {
			t.Fatal("no release")
		}
		if rel.Entries > lim.MaxFiles {
			t.Fatalf("%d entries past the bound %d", rel.Entries, lim.MaxFiles)
		}
		// Nothing outside the release folder.
		entries, _ := os.ReadDir(parent)
		if len(entries) != 1 {
			t.Fatalf("the release wrote beside its folder: %v", entries)
		}
		var total int64
		filepath.Walk(dest, func(p string, fi os.FileInfo, err error) error {
			if err == nil && fi.Mode().IsRegular() {
				total += fi.Size()
			}
			if err == nil && fi.Mode()&os.ModeSymlink != 0 {
				if l, _ := os.Readlink(p); strings.HasPrefix(l, "/") || strings.Contains(l, "..") {
					t.Errorf("a link %s -> %s was written", p, l)
				}
			}
			return nil
		})
		if total > lim.MaxTotalBytes {
			t.Fatalf("%d bytes written past the bound %d", total, lim.MaxTotalBytes)
		}
	})
}

// FuzzUnframe: the frame parser never panics and never returns more than
// MaxPackBytes.
func FuzzUnframe(f *testing.F) {
	f.Add([]byte(FrameBegin + "\naGVsbG8=\n" + FrameEnd + "\n"))
	f.Add([]byte("noise\n" + FrameBegin + "\n!!!\n" + FrameEnd))
	f.Fuzz(func(t *testing.T, b []byte) {
		out, err := Unframe(b)
		if err == nil && len(out) > MaxPackBytes+64 {
			t.Fatalf("%d bytes unframed", len(out))
		}
	})
}
