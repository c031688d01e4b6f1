package process

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"sync"
	"syscall"
	"time"

	"github.com/sandcheck/sandcheck/runners"
)

// pipeGrace bounds how long a finished command's output pipes are read
// after it exits: a child it left behind may hold them open.
const pipeGrace = 2 * time.Second

// killWait bounds waiting for a killed command to be reaped.
const killWait = 10 * time.Second

// Capped keeps the first Limit bytes written to it and counts the rest as
// cut; writes never fail, so the writer is drained. It is safe for
// concurrent use.
type Capped struct {
	mu    sync.Mutex
	buf   []byte
	limit int
	over  bool
}

// NewCapped returns a writer keeping up to limit bytes.
func NewCapped(limit int) *Capped { return &Capped{limit: limit} }

// Write implements io.Writer.
func (c *Capped) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	keep := p
	if room := c.limit - len(c.buf); len(p) > room {
		c.over = true
		keep = p[:max(room, 0)]
	}
	c.buf = append(c.buf, keep...)
	return len(p), nil
}

// Snapshot returns a copy of what was kept and whether anything was cut.
func (c *Capped) Snapshot() ([]byte, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]byte(nil), c.buf...), c.over
}

// Proc is one started host command whose stdout and stderr are kept up to
// runners.MaxOutput each. It runs in a process group of its own.
type Proc struct {
	cmd            *exec.Cmd
	stdout, stderr *Capped
	start          time.Time
	done           chan struct{}
	waitErr        error
}

// StartProc starts cmd (not yet started; its Stdout, Stderr and process
// group are set here) and reaps it in the background.
func StartProc(cmd *exec.Cmd) (*Proc, error) {
	p := &Proc{cmd: cmd, stdout: NewCapped(runners.MaxOutput), stderr: NewCapped(runners.MaxOutput), done: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = p.stdout, p.stderr
	cmd.WaitDelay = pipeGrace
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Setpgid = true
	p.start = time.Now()
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting %s: %w", cmd.Path, err)
	}
	go func() {
		p.waitErr = cmd.Wait()
		close(p.done)
	}()
	return p, nil
}

// Pid is the command's process ID.
func (p *Proc) Pid() int { return p.cmd.Process.Pid }

// Done is closed once the command has been reaped.
func (p *Proc) Done() <-chan struct{} { return p.done }

// Exited reports whether the command has ended.
func (p *Proc) Exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// Kill sends SIGKILL to the command's process group.
func (p *Proc) Kill() {
	_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
	_ = p.cmd.Process.Kill()
}

// Wait waits for the command to end and returns its exit code (128+N when
// killed by signal N) and output. When ctx ends first it returns what was
// read so far, exit code -1 and ctx's error; the command keeps running.
func (p *Proc) Wait(ctx context.Context) (runners.ExitResult, error) {
	select {
	case <-p.done:
	case <-ctx.Done():
		res := p.result()
		res.ExitCode = -1
		return res, fmt.Errorf("waiting for %s: %w", p.cmd.Path, ctx.Err())
	}
	res := p.result()
	st := p.cmd.ProcessState
	var ee *exec.ExitError
	switch {
	case st == nil:
		return res, fmt.Errorf("running %s: %w", p.cmd.Path, p.waitErr)
	case p.waitErr != nil && !errors.As(p.waitErr, &ee) && !errors.Is(p.waitErr, exec.ErrWaitDelay):
		return res, fmt.Errorf("running %s: %w", p.cmd.Path, p.waitErr)
	}
	if ws, ok := st.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		res.ExitCode = 128 + int(ws.Signal())
	} else {
		res.ExitCode = st.ExitCode()
	}
	return res, nil
}

func (p *Proc) result() runners.ExitResult {
	var res runners.ExitResult
	var o1, o2 bool
	res.Stdout, o1 = p.stdout.Snapshot()
	res.Stderr, o2 = p.stderr.Snapshot()
	res.Truncated = o1 || o2
	res.Duration = time.Since(p.start)
	return res
}

// Run starts cmd and waits for it (see Wait). When ctx ends first, the
// command's process group is killed and Run returns exit code -1 with ctx's
// error, once the command is reaped (or after a bound).
func Run(ctx context.Context, cmd *exec.Cmd) (runners.ExitResult, error) {
	p, err := StartProc(cmd)
	if err != nil {
		return runners.ExitResult{ExitCode: -1}, err
	}
	return p.WaitOrKill(ctx)
}

// WaitOrKill is Wait, but when ctx ends first the command's process group
// is killed and it returns exit code -1 with ctx's error, once the command
// is reaped (or after a bound).
func (p *Proc) WaitOrKill(ctx context.Context) (runners.ExitResult, error) {
	res, err := p.Wait(ctx)
	if ctx.Err() != nil && !p.Exited() {
		p.Kill()
		select {
		case <-p.done:
		case <-time.After(killWait):
		}
		res = p.result()
		res.ExitCode = -1
	}
	return res, err
}
