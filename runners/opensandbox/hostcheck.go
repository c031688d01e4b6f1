package opensandbox

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"slices"
	"strconv"
	"strings"

	"github.com/sandcheck/sandcheck/probes"
	"github.com/sandcheck/sandcheck/runners"
)

// Upstream's Docker labels: idLabel on the sandbox's own container
// (server services/constants.py 19), sidecarLabel, and only it, on its
// egress sidecar (services/docker/networking.py 68, 377-379), which holds
// the sandbox's network and so every port binding of it.
const (
	idLabel      = "opensandbox.io/id"
	sidecarLabel = "opensandbox.io/egress-sidecar-for"
)

// maxDockerOut bounds what is read from one docker CLI call.
const maxDockerOut = 1 << 20

// containerView is what the host check reads of one container.
type containerView struct {
	ID         string
	Name       string
	HostConfig struct {
		NetworkMode  string
		PortBindings map[string][]struct{ HostIp, HostPort string }
	}
}

// HostCheck implements runners.HostChecker on this machine's Docker engine,
// where the platform's Docker runtime made the sandbox's containers: the
// sandbox's own (label opensandbox.io/id), its egress sidecar (label
// opensandbox.io/egress-sidecar-for, which upstream gives it instead), and
// whatever container holds the network the sandbox joined
// (NetworkMode container:<id>). execd-published reads the port bindings of
// execd's port on all of them: published on all host addresses (0.0.0.0,
// ::, or none named, as upstream's bridge mode does) is an escape,
// published only on named addresses or not at all holds. A sandbox whose
// containers are not on this engine cannot be checked: an error.
func (s *Sandbox) HostCheck(ctx context.Context, check string) (runners.HostFinding, error) {
	if check != "execd-published" {
		return runners.HostFinding{}, fmt.Errorf("unknown OpenSandbox host check %q", check)
	}
	views, err := sandboxContainers(ctx, s.id)
	if err != nil {
		return runners.HostFinding{}, err
	}
	port := strconv.Itoa(ExecdPort) + "/tcp"
	names := make([]string, 0, len(views))
	for _, v := range views {
		names = append(names, strings.TrimPrefix(v.Name, "/"))
	}
	slices.Sort(names)
	var all, named []string
	for _, v := range views {
		for _, b := range v.HostConfig.PortBindings[port] {
			where := fmt.Sprintf("%s %s:%s", strings.TrimPrefix(v.Name, "/"), b.HostIp, hostPort(b.HostPort))
			switch b.HostIp {
			case "", "0.0.0.0", "::":
				all = append(all, where)
			default:
				named = append(named, where)
			}
		}
	}
	slices.Sort(all)
	slices.Sort(named)
	data := map[string]string{"containers": strconv.Itoa(len(views)), "checked": strings.Join(names, ", "), "all_addresses": strings.Join(all, ", "), "named_addresses": strings.Join(named, ", ")}
	switch {
	case len(all) > 0:
		return runners.HostFinding{Indicates: probes.Escaped, Data: data,
			Summary: fmt.Sprintf("the platform publishes execd's port %d on all host addresses (%s): every network the host is on reaches it", ExecdPort, strings.Join(all, ", "))}, nil
	case len(named) > 0:
		return runners.HostFinding{Indicates: probes.Blocked, Data: data,
			Summary: fmt.Sprintf("the platform publishes execd's port %d only on named host addresses (%s)", ExecdPort, strings.Join(named, ", "))}, nil
	}
	return runners.HostFinding{Indicates: probes.Blocked, Data: data,
		Summary: fmt.Sprintf("the platform publishes execd's port %d on no host address (%d containers of the sandbox checked)", ExecdPort, len(views))}, nil
}

// sandboxContainers inspects every container of sandbox id on this
// machine's Docker engine: those labelled with its id or as its egress
// sidecar, and the holders of their networks (NetworkMode container:X),
// followed at most two steps.
func sandboxContainers(ctx context.Context, id string) ([]containerView, error) {
	var ids []string
	for _, label := range []string{idLabel, sidecarLabel} {
		out, err := dockerOut(ctx, "ps", "-aq", "--no-trunc", "--filter", "label="+label+"="+id)
		if err != nil {
			return nil, fmt.Errorf("listing the sandbox's containers on this machine's Docker engine: %w", err)
		}
		ids = append(ids, strings.Fields(out)...)
	}
	if len(ids) == 0 {
		return nil, fmt.Errorf("no container labelled %s=%s or %s=%s on this machine's Docker engine: the platform's host is not this one",
			idLabel, id, sidecarLabel, id)
	}
	seen := map[string]bool{}
	var views []containerView
	for step := 0; step < 3 && len(ids) > 0; step++ {
		var todo []string
		for _, c := range ids {
			if !seen[c] {
				seen[c] = true
				todo = append(todo, c)
			}
		}
		if len(todo) == 0 {
			break
		}
		out, err := dockerOut(ctx, append([]string{"inspect", "--type", "container"}, todo...)...)
		if err != nil {
			return nil, fmt.Errorf("inspecting the sandbox's containers: %w", err)
		}
		var got []containerView
		if err := json.Unmarshal([]byte(out), &got); err != nil {
			return nil, fmt.Errorf("reading docker inspect's answer: %w", err)
		}
		ids = nil
		for _, v := range got {
			seen[v.ID] = true
			views = append(views, v)
			if holder, ok := strings.CutPrefix(v.HostConfig.NetworkMode, "container:"); ok && holder != "" {
				ids = append(ids, holder)
			}
		}
	}
	return views, nil
}

func hostPort(p string) string {
	if p == "" {
		return "(random)"
	}
	return p
}

// dockerOut runs the docker CLI and returns its bounded standard output.
func dockerOut(ctx context.Context, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, "docker", args...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &boundedWriter{b: &out, n: maxDockerOut}, &boundedWriter{b: &errb, n: 4096}
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("docker %s: %w: %s", args[0], err, strings.TrimSpace(errb.String()))
	}
	return out.String(), nil
}

// boundedWriter keeps at most n bytes and swallows the rest.
type boundedWriter struct {
	b *bytes.Buffer
	n int
}

func (c *boundedWriter) Write(p []byte) (int, error) {
	if room := c.n - c.b.Len(); room > 0 {
		c.b.Write(p[:min(room, len(p))])
	}
	return len(p), nil
}
