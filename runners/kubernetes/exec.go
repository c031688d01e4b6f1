package kubernetes

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/httpstream"
	"k8s.io/client-go/tools/remotecommand"
	utilexec "k8s.io/client-go/util/exec"

	"github.com/sandcheck/sandcheck/runners"
)

// Exec runs argv in the task container through the pod exec subresource
// (WebSocket, falling back to SPDY) and waits for it; output is capped at
// runners.MaxOutput each. A non-zero exit is not an error; an exec that
// did not finish (refused, cut by ctx) has exit code -1.
func (s *Sandbox) Exec(ctx context.Context, argv []string) (runners.ExitResult, error) {
	if len(argv) == 0 {
		return runners.ExitResult{ExitCode: -1}, fmt.Errorf("exec in pod %s: empty command", s.ID())
	}
	start := time.Now()
	req := s.r.cs.core.Post().Resource("pods").Namespace(s.ns).Name(s.pod).
		SubResource("exec").VersionedParams(&corev1.PodExecOptions{
		Container: s.container, Command: argv, Stdout: true, Stderr: true,
	}, paramCodec)
	ws, err := remotecommand.NewWebSocketExecutor(s.r.cfg, "GET", req.URL().String())
	if err != nil {
		return runners.ExitResult{ExitCode: -1}, fmt.Errorf("exec in pod %s: %w", s.ID(), err)
	}
	spdy, err := remotecommand.NewSPDYExecutor(s.r.cfg, "POST", req.URL())
	if err != nil {
		return runners.ExitResult{ExitCode: -1}, fmt.Errorf("exec in pod %s: %w", s.ID(), err)
	}
	ex, err := remotecommand.NewFallbackExecutor(ws, spdy, httpstream.IsUpgradeFailure)
	if err != nil {
		return runners.ExitResult{ExitCode: -1}, fmt.Errorf("exec in pod %s: %w", s.ID(), err)
	}
	stdout, stderr := &capped{max: runners.MaxOutput}, &capped{max: runners.MaxOutput}
	err = ex.StreamWithContext(ctx, remotecommand.StreamOptions{Stdout: stdout, Stderr: stderr})
	res := runners.ExitResult{Stdout: stdout.Bytes(), Stderr: stderr.Bytes(),
		Truncated: stdout.truncated || stderr.truncated, Duration: time.Since(start)}
	var ee utilexec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &ee):
		res.ExitCode = ee.ExitStatus()
	case ctx.Err() != nil:
		res.ExitCode = -1
		return res, fmt.Errorf("exec in pod %s: %w", s.ID(), ctx.Err())
	default:
		res.ExitCode = -1
		return res, fmt.Errorf("exec in pod %s: %w", s.ID(), err)
	}
	return res, nil
}
