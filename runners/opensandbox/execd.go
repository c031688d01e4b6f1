package opensandbox

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"net/textproto"
	"net/url"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/sandcheck/sandcheck/runners"
)

// maxFrame bounds one event of execd's stream (one output line).
const maxFrame = 16 << 20

// interruptTimeout bounds the interrupt sent for a command whose caller gave
// up.
const interruptTimeout = 5 * time.Second

// execd speaks one sandbox's execd API (execd-api.yaml) at the endpoint the
// lifecycle server gave, with the headers it gave.
type execd struct {
	base    string
	headers map[string]string
	http    *http.Client
}

// event is one frame of the command stream.
type event struct {
	Type  string `json:"type"`
	Text  string `json:"text"`
	Error *struct {
		Ename     string   `json:"ename"`
		Evalue    string   `json:"evalue"`
		Traceback []string `json:"traceback"`
	} `json:"error"`
}

func (e *execd) request(ctx context.Context, method, path string, body io.Reader) (*http.Request, error) {
	req, err := http.NewRequestWithContext(ctx, method, e.base+path, body)
	if err != nil {
		return nil, err
	}
	for k, v := range e.headers {
		req.Header.Set(k, v)
	}
	return req, nil
}

// Readiness as the official Go SDK waits for it (sdks/sandbox/go
// sandbox.go 171-177, 308-348; constants.go 30-33): GET /ping every 200 ms
// for at most 30 s. Upstream reports a sandbox Running once its container
// runs, before execd answers.
const (
	pingEvery    = 200 * time.Millisecond
	pingFor      = 30 * time.Second
	pingAttempts = int(pingFor / pingEvery)
	pingTimeout  = 2 * time.Second
)

// ping asks GET /ping once.
func (e *execd) ping(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, pingTimeout)
	defer cancel()
	req, err := e.request(ctx, http.MethodGet, "/ping", nil)
	if err != nil {
		return err
	}
	resp, err := e.http.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 4096))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("status %s", resp.Status)
	}
	return nil
}

// waitReady waits until execd answers GET /ping, bounded by pingAttempts
// tries, pingFor and ctx, whichever ends first.
func (e *execd) waitReady(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, pingFor)
	defer cancel()
	var last error
	for i := 0; i < pingAttempts; i++ {
		if last = e.ping(ctx); last == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("execd GET /ping: no answer within %s (%d tries): %w", pingFor, i+1, last)
		case <-time.After(pingEvery):
		}
	}
	return fmt.Errorf("execd GET /ping: no answer in %d tries: %w", pingAttempts, last)
}

// run runs a shell command and reads its event stream: output kept up to
// runners.MaxOutput per stream, the exit code from CommandExecError (0 on
// execution_complete). When ctx ends first it interrupts the command and
// returns exit code -1 with ctx's error.
func (e *execd) run(ctx context.Context, command string) (runners.ExitResult, error) {
	res, _, err := e.runBody(ctx, map[string]any{"command": command})
	return res, err
}

// spawn starts a command in the background (execd's background mode) as
// uid with extra environment and returns once execd has taken it.
func (e *execd) spawn(ctx context.Context, command string, uid int, envs map[string]string) error {
	res, id, err := e.runBody(ctx, map[string]any{"command": command, "background": true, "uid": uid, "envs": envs})
	if err != nil {
		return err
	}
	if res.ExitCode != 0 {
		return fmt.Errorf("execd POST /command (background): exit %d: %s", res.ExitCode, snippet(res.Stderr))
	}
	if id == "" {
		return errors.New("execd POST /command (background): the stream named no command id")
	}
	return e.checkSpawned(ctx, id)
}

// How long a background command is watched after it was taken: execd
// answers execution_complete at once, whatever becomes of the command, so
// its exit code is read from GET /command/status/{id}.
const (
	spawnChecks     = 5
	spawnCheckEvery = 200 * time.Millisecond
)

// commandStatus is GET /command/status/{id} (execd-api.yaml
// CommandStatusResponse).
type commandStatus struct {
	Running  bool   `json:"running"`
	ExitCode *int   `json:"exit_code"`
	Error    string `json:"error"`
}

// checkSpawned watches a background command for spawnChecks polls: one
// that has already ended with a non-zero exit code is an error (a platform
// agent that could not start); still running or ended with 0 is not.
func (e *execd) checkSpawned(ctx context.Context, id string) error {
	for i := 0; i < spawnChecks; i++ {
		select {
		case <-ctx.Done():
			return fmt.Errorf("execd GET /command/status/%s: %w", id, ctx.Err())
		case <-time.After(spawnCheckEvery):
		}
		st, err := e.status(ctx, id)
		if err != nil {
			return err
		}
		if st.Running {
			continue
		}
		if st.ExitCode != nil && *st.ExitCode != 0 {
			return fmt.Errorf("execd: the background command ended at once with exit code %d: %s", *st.ExitCode, snippet([]byte(st.Error)))
		}
		return nil
	}
	return nil
}

// status reads GET /command/status/{id}.
func (e *execd) status(ctx context.Context, id string) (commandStatus, error) {
	var st commandStatus
	ctx, cancel := context.WithTimeout(ctx, pingTimeout)
	defer cancel()
	req, err := e.request(ctx, http.MethodGet, "/command/status/"+url.PathEscape(id), nil)
	if err != nil {
		return st, fmt.Errorf("execd GET /command/status: %w", err)
	}
	resp, err := e.http.Do(req)
	if err != nil {
		return st, fmt.Errorf("execd GET /command/status/%s: %w", id, err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if resp.StatusCode != http.StatusOK {
		return st, fmt.Errorf("execd GET /command/status/%s: status %s: %s", id, resp.Status, snippet(raw))
	}
	if err := json.Unmarshal(raw, &st); err != nil {
		return st, fmt.Errorf("execd GET /command/status/%s: malformed answer %s: %w", id, snippet(raw), err)
	}
	return st, nil
}

// runBody sends one POST /command and reads its stream; it also returns
// the command's id from the init event ("" when none came).
func (e *execd) runBody(ctx context.Context, cmd map[string]any) (runners.ExitResult, string, error) {
	res := runners.ExitResult{ExitCode: -1}
	var cmdID string
	start := time.Now()
	body, _ := json.Marshal(cmd)
	req, err := e.request(ctx, http.MethodPost, "/command", bytes.NewReader(body))
	if err != nil {
		return res, cmdID, fmt.Errorf("execd POST /command: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := e.http.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return res, cmdID, fmt.Errorf("execd POST /command: %w", ctx.Err())
		}
		return res, cmdID, fmt.Errorf("execd POST /command: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		raw, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		return res, cmdID, fmt.Errorf("execd POST /command: status %s: %s", resp.Status, snippet(raw))
	}
	out, errOut := newCapped(), newCapped()
	finish := func() runners.ExitResult {
		res.Stdout, res.Stderr = out.buf, errOut.buf
		res.Truncated = out.over || errOut.over
		res.Duration = time.Since(start)
		return res
	}
	rd := bufio.NewReaderSize(resp.Body, 64<<10)
	for {
		frame, err := readEvent(rd)
		if err != nil {
			if ctx.Err() != nil {
				e.interrupt(cmdID)
				return finish(), cmdID, fmt.Errorf("execd POST /command: %w", ctx.Err())
			}
			if errors.Is(err, io.EOF) {
				return finish(), cmdID, errors.New("execd POST /command: the stream ended without execution_complete or an error event")
			}
			return finish(), cmdID, fmt.Errorf("execd POST /command: reading the stream: %w", err)
		}
		if frame == nil {
			continue
		}
		var ev event
		if err := json.Unmarshal(frame, &ev); err != nil {
			return finish(), cmdID, fmt.Errorf("execd POST /command: malformed event %s: %w", snippet(frame), err)
		}
		switch ev.Type {
		case "init":
			cmdID = ev.Text
		case "stdout":
			out.line(ev.Text)
		case "stderr":
			errOut.line(ev.Text)
		case "execution_complete":
			res.ExitCode = 0
			return finish(), cmdID, nil
		case "error":
			if ev.Error == nil {
				return finish(), cmdID, fmt.Errorf("execd POST /command: error event without an error: %s", snippet(frame))
			}
			if ev.Error.Ename != "CommandExecError" {
				return finish(), cmdID, fmt.Errorf("execd POST /command: %s: %s", ev.Error.Ename, ev.Error.Evalue)
			}
			code, err := exitCode(ev.Error.Evalue, ev.Error.Traceback)
			if err != nil {
				return finish(), cmdID, fmt.Errorf("execd POST /command: %w", err)
			}
			res.ExitCode = code
			return finish(), cmdID, nil
		}
		// ping and event types this build does not know are skipped.
	}
}

// readEvent reads one event of the stream as the official SDK does
// (sdks/sandbox/go/streaming.go 45-137): lines up to a blank line (or the
// end) make one event; a line starting with '{' (execd's bare JSON) and
// each "data:" line's value are its data, joined with newlines, so a
// multi-line data: frame is one event; comments (':') and other fields
// are skipped. A block without data gives nil.
func readEvent(rd *bufio.Reader) ([]byte, error) {
	var data [][]byte
	size := 0
	for {
		line, err := readLine(rd)
		if err != nil {
			if errors.Is(err, io.EOF) && len(data) > 0 {
				return bytes.Join(data, []byte("\n")), nil
			}
			return nil, err
		}
		switch {
		case len(bytes.TrimSpace(line)) == 0:
			if len(data) > 0 {
				return bytes.Join(data, []byte("\n")), nil
			}
			return nil, nil
		case line[0] == ':':
			continue
		case line[0] == '{':
		default:
			field, value, _ := bytes.Cut(line, []byte(":"))
			if string(field) != "data" {
				continue
			}
			line = bytes.TrimPrefix(value, []byte(" "))
		}
		if size += len(line) + 1; size > maxFrame {
			return nil, fmt.Errorf("an event over %d bytes", maxFrame)
		}
		data = append(data, line)
	}
}

// readLine reads one line without its line end (a last line without one
// too), bounded by maxFrame.
func readLine(rd *bufio.Reader) ([]byte, error) {
	var line []byte
	for {
		chunk, err := rd.ReadSlice('\n')
		line = append(line, chunk...)
		if len(line) > maxFrame {
			return nil, fmt.Errorf("an event over %d bytes", maxFrame)
		}
		if err == bufio.ErrBufferFull {
			continue
		}
		if err != nil && (len(line) == 0 || !errors.Is(err, io.EOF)) {
			return nil, err
		}
		return bytes.TrimRight(line, "\r\n"), nil
	}
}

// exitCode is a finished command's exit code from execd's CommandExecError:
// evalue holds the exit status, or -1 when a signal ended the command, which
// the traceback then names ("signal: killed", Go's wording); a signal is
// kept as the shell writes it, 128 + its number (SIGKILL: 137), so a kill
// is not read as "-1".
func exitCode(evalue string, traceback []string) (int, error) {
	code, err := strconv.Atoi(strings.TrimSpace(evalue))
	if err != nil {
		return -1, fmt.Errorf("CommandExecError with exit value %q", evalue)
	}
	if code != -1 {
		return code, nil
	}
	for _, line := range traceback {
		name, ok := strings.CutPrefix(strings.TrimSpace(line), "signal: ")
		if !ok {
			continue
		}
		name = strings.TrimSuffix(name, " (core dumped)")
		for n := syscall.Signal(1); n < 65; n++ {
			if n.String() == name {
				return 128 + int(n), nil
			}
		}
		return -1, fmt.Errorf("CommandExecError: ended by a signal this runner does not know: %q", line)
	}
	return -1, fmt.Errorf("CommandExecError with exit value -1 and no signal in its traceback %q", traceback)
}

// interrupt asks execd to stop a command the caller gave up on.
func (e *execd) interrupt(id string) {
	if id == "" {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), interruptTimeout)
	defer cancel()
	req, err := e.request(ctx, http.MethodDelete, "/command?id="+url.QueryEscape(id), nil)
	if err != nil {
		return
	}
	if resp, err := e.http.Do(req); err == nil {
		resp.Body.Close()
	}
}

// upload sends one host file to path inside the sandbox with mode (octal
// digits as execd reads them, e.g. 755), as the multipart pair metadata +
// file.
func (e *execd) upload(ctx context.Context, hostPath, path string, mode os.FileMode) error {
	f, err := os.Open(hostPath)
	if err != nil {
		return fmt.Errorf("execd POST /files/upload: %w", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return fmt.Errorf("execd POST /files/upload: %w", err)
	}
	if !fi.Mode().IsRegular() {
		return fmt.Errorf("execd POST /files/upload: %s is not a regular file", hostPath)
	}
	meta, _ := json.Marshal(map[string]any{"path": path, "mode": modeDigits(mode)})
	pr, pw := io.Pipe()
	mw := multipart.NewWriter(pw)
	go func() {
		pw.CloseWithError(writeParts(mw, meta, f))
	}()
	req, err := e.request(ctx, http.MethodPost, "/files/upload", pr)
	if err != nil {
		pr.Close()
		return fmt.Errorf("execd POST /files/upload: %w", err)
	}
	req.Header.Set("Content-Type", mw.FormDataContentType())
	resp, err := e.http.Do(req)
	pr.CloseWithError(io.ErrClosedPipe)
	if err != nil {
		return fmt.Errorf("execd POST /files/upload of %s: %w", path, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		raw, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		return fmt.Errorf("execd POST /files/upload of %s: status %s: %s", path, resp.Status, snippet(raw))
	}
	return nil
}

func writeParts(mw *multipart.Writer, meta []byte, f io.Reader) error {
	h := textproto.MIMEHeader{}
	h.Set("Content-Disposition", `form-data; name="metadata"; filename="metadata"`)
	h.Set("Content-Type", "application/json")
	w, err := mw.CreatePart(h)
	if err != nil {
		return err
	}
	if _, err := w.Write(meta); err != nil {
		return err
	}
	h = textproto.MIMEHeader{}
	h.Set("Content-Disposition", `form-data; name="file"; filename="file"`)
	h.Set("Content-Type", "application/octet-stream")
	if w, err = mw.CreatePart(h); err != nil {
		return err
	}
	if _, err := io.Copy(w, f); err != nil {
		return err
	}
	return mw.Close()
}

// modeDigits writes a permission mode the way execd's metadata reads it:
// the octal digits as a decimal number (0755 -> 755).
func modeDigits(m os.FileMode) int {
	n, _ := strconv.Atoi(strconv.FormatUint(uint64(m.Perm()), 8))
	return n
}

// capped keeps the first runners.MaxOutput bytes of a stream rebuilt from
// its lines.
type capped struct {
	buf   []byte
	lines int
	over  bool
}

func newCapped() *capped { return &capped{} }

// line appends one output line; lines after the first are preceded by the
// newline execd stripped.
func (c *capped) line(s string) {
	if c.lines > 0 {
		c.add("\n")
	}
	c.lines++
	c.add(s)
}

func (c *capped) add(s string) {
	room := runners.MaxOutput - len(c.buf)
	if len(s) > room {
		c.over = true
		s = s[:max(room, 0)]
	}
	c.buf = append(c.buf, s...)
}
