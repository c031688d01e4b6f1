package impl

import (
	"context"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sandcheck/sandcheck/probes"
)

func write(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestWalkerFindsHoneyfiles(t *testing.T) {
	root := t.TempDir()
	outside := t.TempDir()
	write(t, filepath.Join(root, "a/b/"+probes.HoneyPrefix+"1"), "  token-123  \nsecond line\n")
	write(t, filepath.Join(root, "skipme/"+probes.HoneyPrefix+"2"), "x")
	write(t, filepath.Join(outside, probes.HoneyPrefix+"3"), "x")
	deep := root
	for i := 0; i < honeyMaxDepth+2; i++ {
		deep = filepath.Join(deep, "d")
	}
	write(t, filepath.Join(deep, probes.HoneyPrefix+"4"), "too deep")
	// Links are never followed, to files or to folders.
	if err := os.Symlink(outside, filepath.Join(root, "link-dir")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(outside, probes.HoneyPrefix+"3"), filepath.Join(root, probes.HoneyPrefix+"link")); err != nil {
		t.Fatal(err)
	}
	w := &walker{ctx: context.Background(), seen: map[[2]uint64]bool{},
		skip: map[string]bool{filepath.Join(root, "skipme"): true}}
	w.walk([]string{root, root}) // a root given twice is walked once
	if len(w.found) != 1 || !strings.HasSuffix(w.found[0], "a/b/"+probes.HoneyPrefix+"1") {
		t.Fatalf("found %v, want only a/b/%s1", w.found, probes.HoneyPrefix)
	}
	if w.stopped != "" {
		t.Errorf("walk stopped early: %s", w.stopped)
	}
	tok, err := readHoney(w.found[0])
	if err != nil || tok != "token-123" {
		t.Errorf("readHoney = %q, %v; want token-123", tok, err)
	}
}

func TestWalkerStopsAtDeadline(t *testing.T) {
	root := t.TempDir()
	write(t, filepath.Join(root, "a/x"), "")
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	w := &walker{ctx: ctx, seen: map[[2]uint64]bool{}, skip: map[string]bool{}}
	w.walk([]string{root})
	if w.stopped != "deadline" {
		t.Errorf("stopped = %q, want deadline", w.stopped)
	}
}

func TestReadHoneyRefusesLinksAndFIFOs(t *testing.T) {
	dir := t.TempDir()
	write(t, filepath.Join(dir, "real"), "x")
	link := filepath.Join(dir, "link")
	if err := os.Symlink(filepath.Join(dir, "real"), link); err != nil {
		t.Fatal(err)
	}
	if _, err := readHoney(link); err == nil {
		t.Error("readHoney followed a symlink")
	}
}

func TestEngineKind(t *testing.T) {
	for path, want := range map[string]string{
		"/var/run/docker.sock":            "docker",
		"/run/podman/podman.sock":         "podman",
		"/run/containerd/containerd.sock": "containerd",
		"/var/run/crio/crio.sock":         "cri-o",
		"/run/cri-dockerd.sock":           "cri",
		"/hostrun/x.sock":                 "unknown",
	} {
		if got := engineKind(path); got != want {
			t.Errorf("engineKind(%s) = %s, want %s", path, got, want)
		}
	}
}

func TestPingAnswer(t *testing.T) {
	got := pingAnswer(strings.NewReader("HTTP/1.0 200 OK\r\nApi-Version: 1.41\r\nServer: Docker/20.10\r\n\r\nOK"))
	if got != `answered "HTTP/1.0 200 OK" (api 1.41)` {
		t.Errorf("pingAnswer = %q", got)
	}
	if got := pingAnswer(strings.NewReader("")); got != "no answer" {
		t.Errorf("pingAnswer(empty) = %q", got)
	}
}

// TestTrySocket runs a fake docker API on a unix socket: the probe must send
// only the read-only ping and report the answer.
func TestTrySocket(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "docker.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	got := make(chan string, 1)
	go func() {
		c, err := l.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		b := make([]byte, 512)
		n, _ := c.Read(b)
		got <- string(b[:n])
		io.WriteString(c, "HTTP/1.0 200 OK\r\nApi-Version: 1.41\r\n\r\nOK")
	}()
	state, o := trySocket(context.Background(), sock, "docker")
	if o != probes.Escaped || !strings.Contains(state, "api 1.41") {
		t.Errorf("trySocket = %s %q", o, state)
	}
	if req := <-got; req != "GET /_ping HTTP/1.0\r\n\r\n" {
		t.Errorf("request = %q, want only the ping", req)
	}
	l.Close()
	if _, o := trySocket(context.Background(), sock, "docker"); o != probes.Blocked {
		t.Errorf("a closed socket gave %s, want blocked", o)
	}
}

func TestPlantMarker(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, probes.MarkerPrefix+"m1")
	if err := plantMarker(path, "m1"); err != nil {
		t.Fatal(err)
	}
	if err := plantMarker(path, "m1"); err != nil {
		t.Errorf("planting over our own marker: %v", err)
	}
	if b, _ := os.ReadFile(path); string(b) != "m1\n" {
		t.Errorf("marker holds %q", b)
	}
	if err := plantMarker(filepath.Join(dir, "missing", "x"), "m1"); err == nil {
		t.Error("planting in a missing folder succeeded")
	}
}
