package opensandbox

import (
	"bufio"
	"context"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	fixture "github.com/sandcheck/sandcheck/fixtures/opensandbox"
	"github.com/sandcheck/sandcheck/runners"
)

// Exit codes keep the signal that ended a command: execd writes evalue -1
// and Go's "signal: killed" in the traceback (seen from the shipped execd),
// which the runner reads as the shell does, 128 + the signal's number.
func TestExitCode(t *testing.T) {
	for _, c := range []struct {
		evalue string
		tb     []string
		want   int
		ok     bool
	}{
		{"3", []string{"exit status 3"}, 3, true},
		{"-1", []string{"signal: killed"}, 137, true},
		{"-1", []string{"signal: terminated"}, 143, true},
		{"-1", []string{"signal: segmentation fault (core dumped)"}, 139, true},
		{"-1", nil, -1, false},
		{"-1", []string{"signal: no such signal"}, -1, false},
		{"three", nil, -1, false},
	} {
		got, err := exitCode(c.evalue, c.tb)
		if got != c.want || (err == nil) != c.ok {
			t.Errorf("exitCode(%q, %q) = %d, %v; want %d (ok %v)", c.evalue, c.tb, got, err, c.want, c.ok)
		}
	}
}

// The stream is read as the official SDK reads it (sdks/sandbox/go
// streaming.go 45-137): execd's bare JSON separated by blank lines, one-
// and multi-line "data:" frames, comments and other fields skipped, CRLF
// line ends, a last event without a blank line after it.
func TestReadEvent(t *testing.T) {
	stream := "{\"type\":\"init\",\"text\":\"id1\"}\n\n" +
		": a comment\n\n" +
		"data: {\"type\":\"stdout\",\"text\":\"one\"}\n\n" +
		"event: stdout\nid: 7\ndata: {\"type\":\"stdout\",\r\ndata: \"text\":\"two\"}\r\n\r\n" +
		"data:{\"type\":\"execution_complete\"}"
	rd := bufio.NewReader(strings.NewReader(stream))
	var got []string
	for i := 0; i < 20; i++ {
		f, err := readEvent(rd)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if f != nil {
			got = append(got, string(f))
		}
	}
	want := []string{`{"type":"init","text":"id1"}`, `{"type":"stdout","text":"one"}`, "{\"type\":\"stdout\",\n\"text\":\"two\"}", `{"type":"execution_complete"}`}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("events %q, want %q", got, want)
	}
}

// TestSignalsAndBackground through the real execd: a command killed by
// SIGKILL exits 137, not -1; a background command that ends at once with
// an error fails the spawn (execd answers execution_complete either way,
// its exit code is in GET /command/status/{id}); one that keeps running,
// or ends with 0, does not.
func TestSignalsAndBackground(t *testing.T) {
	_, url := startServer(t, fixture.Config{})
	r, err := New(testCfg(url), testImage, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	sb, err := r.Start(context.Background(), runners.SandboxSpec{Name: "signals", ProbeDir: probeDir(t), StartTimeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close(context.Background())
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for argv, want := range map[string]int{"kill -9 $$": 137, "kill -TERM $$": 143, "exit 5": 5} {
		res, err := sb.Exec(ctx, []string{"sh", "-c", argv})
		if err != nil || res.ExitCode != want {
			t.Errorf("%s: exit %d (%v), want %d", argv, res.ExitCode, err, want)
		}
	}
	s := sb.(*Sandbox)
	if err := s.Spawn(ctx, []string{"sh", "-c", "exit 3"}, "0", nil); err == nil || !strings.Contains(err.Error(), "exit code 3") {
		t.Errorf("spawn of a command exiting 3: %v, want an error naming exit code 3", err)
	}
	if err := s.Spawn(ctx, []string{"/no/such/agent"}, "0", nil); err == nil || !strings.Contains(err.Error(), "exit code 127") {
		t.Errorf("spawn of a missing binary: %v, want an error naming exit code 127", err)
	}
	if err := s.Spawn(ctx, []string{"sleep", "20"}, "0", []string{"K=v"}); err != nil {
		t.Errorf("spawn of a command that keeps running: %v", err)
	}
	if err := s.Spawn(ctx, []string{"true"}, "0", nil); err != nil {
		t.Errorf("spawn of a command ending with 0: %v", err)
	}
}
