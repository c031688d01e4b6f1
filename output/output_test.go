package output

import (
	"archive/tar"
	"archive/zip"
	"bytes"
	"compress/gzip"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

type entry struct {
	name, link string
	typ        byte
	body       []byte
	size       int64 // header size when it differs from len(body) (a lying header)
}

func mkTar(t testing.TB, es []entry) []byte {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range es {
		h := &tar.Header{Name: e.name, Linkname: e.link, Typeflag: e.typ, Mode: 0o644, Size: int64(len(e.body)), ModTime: time.Unix(0, 0), Format: tar.FormatPAX}
		if e.typ != tar.TypeReg {
			h.Size = 0
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatalf("writing header %q: %v", e.name, err)
		}
		if _, err := tw.Write(e.body); err != nil {
			t.Fatalf("writing %q: %v", e.name, err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func gzipOf(t testing.TB, n int) []byte {
	var b bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&b, gzip.BestCompression)
	zw.Write(make([]byte, n))
	zw.Close()
	return b.Bytes()
}

func zipOf(t testing.TB, n int) []byte {
	var b bytes.Buffer
	zw := zip.NewWriter(&b)
	w, err := zw.Create("zeros")
	if err != nil {
		t.Fatal(err)
	}
	w.Write(make([]byte, n))
	zw.Close()
	return b.Bytes()
}

func find(t *testing.T, rel *Release, path string) Artifact {
	t.Helper()
	for _, a := range rel.Artifacts {
		if a.Path == path {
			return a
		}
	}
	t.Fatalf("no artifact %q in %+v", path, rel.Artifacts)
	return Artifact{}
}

// hostileEntries covers every kind of hostile artifact the gate must flag,
// with the flag each must carry.
func hostileEntries(t testing.TB) ([]entry, map[string]string) {
	es := []entry{
		{name: "ok.txt", typ: tar.TypeReg, body: []byte("hello\n")},
		{name: "sub/", typ: tar.TypeDir},
		{name: "sub/ok2.txt", typ: tar.TypeReg, body: []byte("fine")},
		{name: "link-out", link: "/etc/passwd", typ: tar.TypeSymlink},
		{name: "link-up", link: "../../x", typ: tar.TypeSymlink},
		{name: "hard", link: "/etc/shadow", typ: tar.TypeLink},
		{name: "fifo", typ: tar.TypeFifo},
		{name: "dev", typ: tar.TypeChar},
		{name: "../../escape.txt", typ: tar.TypeReg, body: []byte("x")},
		{name: "/abs.txt", typ: tar.TypeReg, body: []byte("x")},
		{name: `..\..\win.txt`, typ: tar.TypeReg, body: []byte("x")},
		{name: "ctl\nname", typ: tar.TypeReg, body: []byte("x")},
		{name: "big.bin", typ: tar.TypeReg, body: bytes.Repeat([]byte("a"), 70000)},
		{name: "bomb.gz", typ: tar.TypeReg, body: gzipOf(t, 4<<20)},
		{name: "bomb.zip", typ: tar.TypeReg, body: zipOf(t, 4<<20)},
		{name: "secret.txt", typ: tar.TypeReg, body: []byte("key=AKIAS4NDCHECKH0NEY99\n")},
		{name: "eicar.com", typ: tar.TypeReg, body: EICAR()},
		{name: "page.html", typ: tar.TypeReg, body: []byte("<html><body><script>alert(1)</script></body></html>")},
		{name: "img.svg", typ: tar.TypeReg, body: []byte(`<svg xmlns="http://www.w3.org/2000/svg" onload="alert(1)"></svg>`)},
		{name: "prog", typ: tar.TypeReg, body: append([]byte("\x7fELF\x02\x01\x01"), make([]byte, 64)...)},
		{name: "ok.txt", typ: tar.TypeReg, body: []byte("overwrite attempt")},
	}
	want := map[string]string{
		"link-out": FlagSymlinkOutside, "link-up": FlagSymlinkOutside, "hard": FlagHardlink, "fifo": FlagSpecial, "dev": FlagSpecial,
		"../../escape.txt": FlagTraversalName, "/abs.txt": FlagAbsoluteName, `..\..\win.txt`: FlagTraversalName, `ctl\nname`: FlagControlName,
		"big.bin": FlagOversize, "bomb.gz": FlagArchiveBomb, "bomb.zip": FlagArchiveBomb, "secret.txt": FlagSecret,
		"eicar.com": FlagEICAR, "page.html": FlagActiveContent, "img.svg": FlagActiveContent, "prog": FlagExecutable,
	}
	return es, want
}

var testLimits = Limits{MaxFiles: 64, MaxFileBytes: 64 << 10, MaxTotalBytes: 1 << 20, MaxExpandBytes: 16 << 20, MaxRatio: 100}

func TestReadTarFlagsAndWithholdsEveryHostileKind(t *testing.T) {
	es, want := hostileEntries(t)
	dest := t.TempDir()
	rel := ReadTar(bytes.NewReader(mkTar(t, es)), dest, testLimits)
	if rel.Error != "" || rel.Truncated {
		t.Fatalf("release error %q truncated %t", rel.Error, rel.Truncated)
	}
	for name, flag := range want {
		a := find(t, rel, name)
		if !a.Flagged(flag) {
			t.Errorf("%s: flags %v, want %s", name, a.Flags, flag)
		}
		if a.Released {
			t.Errorf("%s: hostile artifact released", name)
		}
	}
	if a := find(t, rel, "ok.txt"); !a.Released || a.SHA256 == "" || !strings.HasPrefix(a.Type, "text/plain") {
		t.Errorf("ok.txt: %+v, want released with digest and text type", a)
	}
	if a := rel.Artifacts[len(rel.Artifacts)-1]; !a.Flagged(FlagDuplicateName) || a.Released {
		t.Errorf("second ok.txt: %+v, want duplicate-name and withheld", a)
	}
	if b, _ := os.ReadFile(filepath.Join(dest, "ok.txt")); string(b) != "hello\n" {
		t.Errorf("ok.txt holds %q: the duplicate overwrote it", b)
	}
	// The release folder holds only the clean files, all regular, none outside.
	var got []string
	filepath.WalkDir(filepath.Dir(dest), func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !strings.HasPrefix(p, dest) && p != filepath.Dir(dest) {
			t.Errorf("%s written outside the release folder", p)
		}
		if d.Type()&fs.ModeType != 0 && !d.IsDir() {
			t.Errorf("%s is a %s, not a regular file", p, d.Type())
		}
		if !d.IsDir() {
			got = append(got, strings.TrimPrefix(p, dest+"/"))
		}
		return nil
	})
	if strings.Join(got, ",") != "ok.txt,sub/ok2.txt" {
		t.Errorf("released files %v, want ok.txt and sub/ok2.txt", got)
	}
}

func TestReadTarManyEntriesStaysBounded(t *testing.T) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for i := range 100000 {
		tw.WriteHeader(&tar.Header{Name: "f" + string(rune('a'+i%26)) + strings.Repeat("x", i%7), Typeflag: tar.TypeReg, Mode: 0o644})
	}
	tw.Close()
	start := time.Now()
	rel := ReadTar(bytes.NewReader(buf.Bytes()), t.TempDir(), Limits{MaxFiles: 1000})
	if !rel.Truncated || rel.Entries != 1000 || len(rel.Artifacts) != 1000 {
		t.Fatalf("entries %d artifacts %d truncated %t, want stopped at 1000", rel.Entries, len(rel.Artifacts), rel.Truncated)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("took %s", d)
	}
}

func TestReadTarLyingSizesStayBounded(t *testing.T) {
	// A header claiming 1 TiB: the gate reads its bound and stops at the
	// stream cap, never more.
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	tw.WriteHeader(&tar.Header{Name: "huge", Typeflag: tar.TypeReg, Size: 1 << 40, Mode: 0o644})
	tw.Write(make([]byte, 64<<10))
	rel := ReadTar(bytes.NewReader(buf.Bytes()), t.TempDir(), Limits{MaxFileBytes: 1024, MaxTotalBytes: 2048})
	a := find(t, rel, "huge")
	if !a.Flagged(FlagOversize) || a.Released || a.Read != 1024 {
		t.Errorf("huge: %+v, want oversize, withheld, 1024 bytes read", a)
	}
	// A stream that goes on past the cap is cut: the header's 1 TiB is
	// endless here, and skipping it must stop at the stream bound.
	hdr := buf.Bytes()[:len(buf.Bytes())-64<<10] // the headers alone, without the body
	rel = ReadTar(io.MultiReader(bytes.NewReader(hdr), zeroReader{}), t.TempDir(), Limits{MaxFiles: 4, MaxFileBytes: 1024, MaxTotalBytes: 2048})
	if !rel.Truncated || rel.Error == "" {
		t.Errorf("an endless stream was not cut at the bound: %+v", rel)
	}
}

type zeroReader struct{}

func (zeroReader) Read(p []byte) (int, error) { clear(p); return len(p), nil }

func TestWalkFlagsWithoutFollowing(t *testing.T) {
	if os.Getuid() != 0 {
		t.Log("not root: the device node case is left out")
	}
	dir := t.TempDir()
	outside := filepath.Join(t.TempDir(), "target")
	os.WriteFile(outside, EICAR(), 0o644)
	w := func(name string, b []byte) {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	w("ok.txt", []byte("fine"))
	w(`..\..\x`, []byte("x"))
	w("secret", []byte("ghp_"+strings.Repeat("a", 36)))
	w("bomb.gz", gzipOf(t, 4<<20))
	os.Symlink(outside, filepath.Join(dir, "link"))
	os.Mkdir(filepath.Join(dir, "d"), 0o755)
	os.Symlink("../../..", filepath.Join(dir, "d", "up"))
	syscall.Mkfifo(filepath.Join(dir, "fifo"), 0o644)
	if os.Getuid() == 0 {
		syscall.Mknod(filepath.Join(dir, "null"), syscall.S_IFCHR|0o644, 1<<8|3)
	}
	os.Link(filepath.Join(dir, "ok.txt"), filepath.Join(dir, "hard"))
	done := make(chan *Release, 1)
	go func() { done <- Walk(dir, testLimits) }()
	var rel *Release
	select {
	case rel = <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Walk hung (a fifo was opened?)")
	}
	checks := map[string]string{"link": FlagSymlinkOutside, "d/up": FlagSymlinkOutside, "fifo": FlagSpecial, `..\..\x`: FlagTraversalName,
		"secret": FlagSecret, "bomb.gz": FlagArchiveBomb, "hard": FlagHardlink}
	if os.Getuid() == 0 {
		checks["null"] = FlagSpecial
	}
	for name, flag := range checks {
		if a := find(t, rel, name); !a.Flagged(flag) {
			t.Errorf("%s: flags %v, want %s", name, a.Flags, flag)
		}
	}
	if a := find(t, rel, "link"); a.Flagged(FlagEICAR) || a.SHA256 != "" {
		t.Errorf("the link was followed: %+v", a)
	}
}

func TestWalkBounded(t *testing.T) {
	dir := t.TempDir()
	for i := range 50 {
		os.WriteFile(filepath.Join(dir, "f"+strings.Repeat("x", i)), []byte("x"), 0o644)
	}
	rel := Walk(dir, Limits{MaxFiles: 10})
	if !rel.Truncated || len(rel.Artifacts) != 10 {
		t.Errorf("artifacts %d truncated %t, want 10 and truncated", len(rel.Artifacts), rel.Truncated)
	}
}

func FuzzReadTar(f *testing.F) {
	es, _ := hostileEntries(f)
	f.Add(mkTar(f, es[:8]))
	f.Add(mkTar(f, []entry{{name: "a", typ: tar.TypeReg, body: []byte("x")}}))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, data []byte) {
		parent := t.TempDir()
		dest := filepath.Join(parent, "rel")
		if err := os.Mkdir(dest, 0o755); err != nil {
			t.Fatal(err)
		}
		lim := Limits{MaxFiles: 32, MaxFileBytes: 4096, MaxTotalBytes: 16384, MaxExpandBytes: 1 << 20}
		rel := ReadTar(bytes.NewReader(data), dest, lim)
		if rel.Entries > lim.MaxFiles || rel.Bytes > lim.MaxTotalBytes {
			t.Fatalf("bounds passed: %d entries, %d bytes", rel.Entries, rel.Bytes)
		}
		ents, _ := os.ReadDir(parent)
		if len(ents) != 1 {
			t.Fatalf("something was written next to the release folder: %v", ents)
		}
		filepath.WalkDir(dest, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				t.Fatal(err)
			}
			if !d.IsDir() && !d.Type().IsRegular() {
				t.Fatalf("%s is %s, not a regular file", p, d.Type())
			}
			return nil
		})
		for _, a := range rel.Artifacts {
			if a.Released && len(a.Flags) > 0 {
				t.Fatalf("flagged artifact released: %+v", a)
			}
		}
	})
}
