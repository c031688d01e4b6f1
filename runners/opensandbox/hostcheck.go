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

// idLabel is the label upstream's Docker runtime puts on every container of
// a sandbox (the sandbox itself and its egress sidecar), holding its id.
const idLabel = "opensandbox.io/id"

// maxDockerOut bounds what is read from one docker CLI call.
const maxDockerOut = 1 << 20

// HostCheck implements runners.HostChecker on this machine's Docker engine,
// where the platform's Docker runtime made the sandbox's containers (found
// by their opensandbox.io/id label). execd-published reads the port
// bindings of execd's port: published on all host addresses (0.0.0.0, ::,
// or none named, as upstream's bridge mode does) is an escape, published
// only on named addresses or not at all holds. A sandbox whose containers
// are not on this engine cannot be checked: an error.
func (s *Sandbox) HostCheck(ctx context.Context, check string) (runners.HostFinding, error) {
	if check != "execd-published" {
		return runners.HostFinding{}, fmt.Errorf("unknown OpenSandbox host check %q", check)
	}
	out, err := dockerOut(ctx, "ps", "-aq", "--filter", "label="+idLabel+"="+s.id)
	if err != nil {
		return runners.HostFinding{}, fmt.Errorf("listing the sandbox's containers on this machine's Docker engine: %w", err)
	}
	ids := strings.Fields(out)
	if len(ids) == 0 {
		return runners.HostFinding{}, fmt.Errorf("no container labelled %s=%s on this machine's Docker engine: the platform's host is not this one", idLabel, s.id)
	}
	out, err = dockerOut(ctx, append([]string{"inspect", "--type", "container"}, ids...)...)
	if err != nil {
		return runners.HostFinding{}, fmt.Errorf("inspecting the sandbox's containers: %w", err)
	}
	var views []struct {
		Name       string
		HostConfig struct {
			PortBindings map[string][]struct{ HostIp, HostPort string }
		}
	}
	if err := json.Unmarshal([]byte(out), &views); err != nil {
		return runners.HostFinding{}, fmt.Errorf("reading docker inspect's answer: %w", err)
	}
	port := strconv.Itoa(ExecdPort) + "/tcp"
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
	data := map[string]string{"containers": strconv.Itoa(len(views)), "all_addresses": strings.Join(all, ", "), "named_addresses": strings.Join(named, ", ")}
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
