package gateway

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/sandcheck/sandcheck/runners"
)

var idPattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$`)

// chunk is how many bytes of a packed file one copy task carries (its
// base64 in the task's shell line stays under Linux's 128 KiB limit on one
// argument, since the gateway runs a task as sh -c TASK).
const chunk = 90 << 10

// Sandbox is one gateway instance.
type Sandbox struct {
	r    *Runner
	id   string
	env  map[string]string
	host *hostView
	once sync.Once
	err  error
	left []string
}

// ID implements runners.Sandbox: the instance ID.
func (s *Sandbox) ID() string { return s.id }

// Exec implements runners.Sandbox as one task: the argv as a shell line,
// the spec's environment exported first. The answer is read through the
// target's task_response mapping; a missing or mistyped field is an error.
func (s *Sandbox) Exec(ctx context.Context, argv []string) (runners.ExitResult, error) {
	if len(argv) == 0 {
		return runners.ExitResult{ExitCode: -1}, errors.New("exec: empty command")
	}
	return s.task(ctx, exports(s.env)+"exec "+runners.ShellQuote(argv))
}

func (s *Sandbox) task(ctx context.Context, line string) (runners.ExitResult, error) {
	t0 := time.Now()
	var raw map[string]json.RawMessage
	req := map[string]string{"task": line, "capability": s.r.cfg.Capability}
	// The caller's deadline bounds the task; the call's own bound is set
	// past it, so a task cut short reports the caller's deadline.
	timeout := 10 * time.Minute
	if dl, ok := ctx.Deadline(); ok {
		timeout = time.Until(dl) + time.Second
	}
	_, err := s.r.api.call(ctx, http.MethodPost, "/v1/runtime/agents/"+s.id+"/tasks", s.r.admin, req, &raw, timeout)
	res := runners.ExitResult{ExitCode: -1, Duration: time.Since(t0)}
	if err != nil {
		return res, err
	}
	m := s.r.cfg.TaskResponse
	if err := json.Unmarshal(raw[m.ExitCode], &res.ExitCode); err != nil || raw[m.ExitCode] == nil {
		res.ExitCode = -1
		return res, fmt.Errorf("POST /v1/runtime/agents/{id}/tasks: field %q (task_response.exit_code) is not a number in the answer", m.ExitCode)
	}
	for _, f := range []struct {
		name string
		dst  *[]byte
		req  bool
	}{{m.Stdout, &res.Stdout, true}, {m.Stderr, &res.Stderr, false}} {
		if f.name == "" {
			continue
		}
		var v string
		if rm, ok := raw[f.name]; ok || f.req {
			if err := json.Unmarshal(rm, &v); err != nil {
				return res, fmt.Errorf("POST /v1/runtime/agents/{id}/tasks: field %q of task_response is not a string in the answer", f.name)
			}
		}
		if len(v) > runners.MaxOutput {
			v, res.Truncated = v[:runners.MaxOutput], true
		}
		*f.dst = []byte(v)
	}
	return res, nil
}

// CopyIn implements runners.Sandbox through tasks: the file gzipped, in
// base64 chunks written side by side to a scratch folder next to the
// destination, then joined, unpacked and moved into place with its mode.
// The box needs sh, base64, gunzip, cat, chmod and mv (busybox has them).
func (s *Sandbox) CopyIn(ctx context.Context, hostPath, sandboxPath string) error {
	packed, mode, err := gzipFile(hostPath)
	if err != nil {
		return fmt.Errorf("copying %s in: %w", hostPath, err)
	}
	scratch := sandboxPath + ".parts"
	q := func(p string) string { return runners.ShellQuote([]string{p}) }
	if err := s.must(ctx, "mkdir -p "+q(path.Dir(sandboxPath))+" && rm -rf "+q(scratch)+" && mkdir "+q(scratch)); err != nil {
		return fmt.Errorf("copying %s in: %w", hostPath, err)
	}
	n := (len(packed) + chunk - 1) / chunk
	errs := make([]error, n)
	sem := make(chan struct{}, copyLanes)
	var wg sync.WaitGroup
	for i := range n {
		part := packed[i*chunk : min((i+1)*chunk, len(packed))]
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			line := "printf %s " + base64.StdEncoding.EncodeToString(part) + " | base64 -d > " + q(fmt.Sprintf("%s/%06d", scratch, i))
			errs[i] = s.must(ctx, line)
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("copying %s in: %w", hostPath, err)
	}
	line := fmt.Sprintf("cat %s/* | gunzip > %s && chmod %o %s && mv -f %s %s && rm -rf %s",
		q(scratch), q(scratch+".out"), mode, q(scratch+".out"), q(scratch+".out"), q(sandboxPath), q(scratch))
	if err := s.must(ctx, line); err != nil {
		return fmt.Errorf("copying %s in: %w", hostPath, err)
	}
	return nil
}

// maxCopy bounds a file copied in.
const maxCopy = 256 << 20

// copyLanes is how many chunk tasks run at once.
const copyLanes = 8

func gzipFile(p string) ([]byte, os.FileMode, error) {
	f, err := os.Open(p)
	if err != nil {
		return nil, 0, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, 0, err
	}
	if !st.Mode().IsRegular() || st.Size() > maxCopy {
		return nil, 0, fmt.Errorf("not a regular file of at most %d bytes", maxCopy)
	}
	var b bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&b, gzip.BestCompression)
	if _, err := io.Copy(zw, f); err != nil {
		return nil, 0, err
	}
	if err := zw.Close(); err != nil {
		return nil, 0, err
	}
	return b.Bytes(), st.Mode().Perm(), nil
}

// must runs a task that must exit 0.
func (s *Sandbox) must(ctx context.Context, line string) error {
	res, err := s.task(ctx, line)
	if err != nil {
		return err
	}
	if res.ExitCode != 0 {
		return fmt.Errorf("task exited %d: %s", res.ExitCode, truncate(strings.TrimSpace(string(res.Stderr)), 300))
	}
	return nil
}

// deliver copies the probe folder's regular files to runners.ProbeMount and
// checks the probe binary answers.
func (s *Sandbox) deliver(ctx context.Context, dir string) error {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("reading probe folder: %w", err)
	}
	if !slices.ContainsFunc(ents, func(e os.DirEntry) bool { return e.Name() == runners.ProbeBinary && e.Type().IsRegular() }) {
		return fmt.Errorf("probe folder %s holds no %s", dir, runners.ProbeBinary)
	}
	for _, e := range ents {
		if e.Type().IsRegular() {
			if err := s.CopyIn(ctx, filepath.Join(dir, e.Name()), path.Join(runners.ProbeMount, e.Name())); err != nil {
				return fmt.Errorf("copying the probe folder in: %w", err)
			}
		}
	}
	res, err := s.Exec(ctx, []string{runners.ProbeMount + "/" + runners.ProbeBinary, "list"})
	if err != nil {
		return fmt.Errorf("checking the probe binary answers: %w", err)
	}
	if res.ExitCode != 0 {
		return fmt.Errorf("the probe binary did not answer: exit %d: %s", res.ExitCode, truncate(string(res.Stderr), 300))
	}
	return nil
}

// Close implements runners.Sandbox: the host checks that need the box, then
// DELETE ?force=true, then the checks after delete. It is bounded by the
// API timeout, not by ctx, so a cancelled run still deletes what it made.
func (s *Sandbox) Close(ctx context.Context) error {
	s.once.Do(func() {
		ctx := context.WithoutCancel(ctx)
		if s.host != nil {
			s.host.keyWorks(ctx, s.r.api)
			s.left = append(s.left, s.host.inside(ctx)...)
		}
		_, err := s.r.api.call(ctx, http.MethodDelete, "/v1/runtime/agents/"+s.id+"?force=true", s.r.admin, nil, nil, 0)
		var ae *apiError
		if err != nil && !(errors.As(err, &ae) && ae.status == http.StatusNotFound) {
			s.err = fmt.Errorf("deleting instance %s: %w", s.id, err)
		}
		if s.host != nil {
			s.left = append(s.left, s.host.after(ctx, s.r.api)...)
		}
	})
	return s.err
}

// VerifyTeardown implements runners.TeardownVerifier: what the host-side
// checks found (the key inside the box, a way out besides the sidecar, a
// container left, the key still accepted after delete).
func (s *Sandbox) VerifyTeardown(ctx context.Context) ([]string, error) {
	return s.left, nil
}

func exports(env map[string]string) string {
	keys := make([]string, 0, len(env))
	for k := range env {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var b strings.Builder
	for _, k := range keys {
		b.WriteString("export " + k + "=" + runners.ShellQuote([]string{env[k]}) + "; ")
	}
	return b.String()
}

// Spawn starts argv in the box in the background through one task, with
// env added to the sandbox's own. A task runs as the box's user: a spawn
// as another user is refused inside (exit 97), never run as the wrong one.
func (s *Sandbox) Spawn(ctx context.Context, argv []string, user string, env []string) error {
	extra := map[string]string{}
	for k, v := range s.env {
		extra[k] = v
	}
	for _, e := range env {
		if k, v, ok := strings.Cut(e, "="); ok {
			extra[k] = v
		}
	}
	line := fmt.Sprintf(`[ "$(id -u)" = %s ] || { echo "tasks run as uid $(id -u), not %s" >&2; exit 97; }; (%sexec %s) </dev/null >/dev/null 2>&1 &`,
		runners.ShellQuote([]string{user}), user, exports(extra), runners.ShellQuote(argv))
	if err := s.must(ctx, line); err != nil {
		return fmt.Errorf("starting %s beside the task: %w", argv[0], err)
	}
	return nil
}
