package docker

import (
	"context"
	"fmt"
	"strings"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/api/pkg/stdcopy"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"

	"github.com/sandcheck/sandcheck/runners"
)

// Bounds on what a failed start reports of the container's own output.
const (
	logTailLines = 20
	logTailBytes = 16 << 10
)

// describe summarises a container that did not become ready: its state and
// its last log lines. It returns "" when the container is gone.
func describe(ctx context.Context, cli client.APIClient, ref string) string {
	res, err := cli.ContainerInspect(ctx, ref, client.ContainerInspectOptions{})
	if err != nil {
		return ""
	}
	parts := []string{"state: " + stateString(res.Container.State)}
	if logs := tailLogs(ctx, cli, ref); logs != "" {
		parts = append(parts, "last log lines: "+logs)
	}
	return strings.Join(parts, "; ")
}

// stateString is a container state in one line.
func stateString(st *container.State) string {
	if st == nil {
		return "unknown"
	}
	s := fmt.Sprintf("%s, exit code %d", st.Status, st.ExitCode)
	if st.OOMKilled {
		s += ", killed for memory"
	}
	if st.Error != "" {
		s += fmt.Sprintf(", error %q", st.Error)
	}
	return s
}

// tailLogs reads the container's last log lines, bounded.
func tailLogs(ctx context.Context, cli client.APIClient, ref string) string {
	rc, err := cli.ContainerLogs(ctx, ref, client.ContainerLogsOptions{
		ShowStdout: true, ShowStderr: true, Tail: fmt.Sprint(logTailLines),
	})
	if err != nil {
		return ""
	}
	defer rc.Close()
	out := newCapped(logTailBytes)
	_, _ = stdcopy.StdCopy(out, out, rc)
	return runners.LastLines(out.buf, logTailLines)
}

// remove kills and removes a container and its anonymous volumes; a
// container that is already gone is not an error.
func remove(ctx context.Context, cli client.APIClient, ref string) error {
	_, err := cli.ContainerRemove(ctx, ref, client.ContainerRemoveOptions{Force: true, RemoveVolumes: true})
	if err != nil && !cerrdefs.IsNotFound(err) {
		return fmt.Errorf("removing container %s: %w", ref, err)
	}
	return nil
}
