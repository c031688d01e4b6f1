package gateway

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"strconv"
	"strings"

	"github.com/sandcheck/sandcheck/internal/bounded"
	"github.com/sandcheck/sandcheck/targets"
)

// hostView makes the document's host-side proof on this machine's Docker
// engine: the box and its egress sidecar by name, the scoped key read from
// the sidecar (where the vault holds it) and looked for in the box.
type hostView struct {
	cfg         *targets.GatewayHost
	box, egress string
	key         string
	keyWorked   bool
	notes       []string
}

func newHostView(cfg *targets.GatewayHost, id string) *hostView {
	return &hostView{cfg: cfg, box: strings.ReplaceAll(cfg.Box, "${ID}", id), egress: strings.ReplaceAll(cfg.Egress, "${ID}", id)}
}

// maxCLI bounds what is read from one docker CLI call.
const maxCLI = 4 << 20

func dockerCLI(ctx context.Context, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, "docker", args...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &limited{&out, maxCLI}, &limited{&errb, 4096}
	if err := cmd.Run(); err != nil {
		return out.Bytes(), fmt.Errorf("docker %s: %w: %s", args[0], err, strings.TrimSpace(errb.String()))
	}
	return out.Bytes(), nil
}

type limited struct {
	w *bytes.Buffer
	n int
}

func (l *limited) Write(p []byte) (int, error) {
	if room := l.n - l.w.Len(); room > 0 {
		l.w.Write(p[:min(room, len(p))])
	}
	return len(p), nil
}

type inspected struct {
	ID         string
	Config     struct{ Env []string }
	State      struct{ Pid int }
	HostConfig struct {
		NetworkMode string
	}
	NetworkSettings struct {
		Networks map[string]struct{ NetworkID string }
	}
}

func inspect(ctx context.Context, name string) (*inspected, error) {
	b, err := dockerCLI(ctx, "inspect", "--type", "container", name)
	if err != nil {
		return nil, err
	}
	var v []inspected
	if err := json.Unmarshal(b, &v); err != nil || len(v) != 1 {
		return nil, fmt.Errorf("docker inspect %s: unreadable answer", name)
	}
	return &v[0], nil
}

// before reads the scoped key from the sidecar and checks it works: without
// both, revocation could not be shown.
func (h *hostView) before(ctx context.Context) error {
	eg, err := inspect(ctx, h.egress)
	if err != nil {
		return fmt.Errorf("host view: the egress sidecar: %w", err)
	}
	for _, e := range eg.Config.Env {
		if k, v, ok := strings.Cut(e, "="); ok && k == h.cfg.KeyEnv && v != "" {
			h.key = v
		}
	}
	if h.key == "" {
		return fmt.Errorf("host view: the egress sidecar %s holds no %s", h.egress, h.cfg.KeyEnv)
	}
	return nil
}

// keyWorks checks, before delete, that the gateway accepts the key: only
// then does its refusal after delete show a revocation.
func (h *hostView) keyWorks(ctx context.Context, api *client) {
	if _, err := api.call(ctx, http.MethodGet, h.cfg.KeyCheckPath, h.key, nil, nil, 0); err != nil {
		h.notes = append(h.notes, fmt.Sprintf("teardown check failed: the scoped key was not accepted before delete (%v), so its refusal after cannot show a revocation", err))
		return
	}
	h.keyWorked = true
}

// inside looks for the key in the box (environment, every process's
// arguments and environment, its files) and checks the box's network is
// the sidecar's alone, on internal networks only.
func (h *hostView) inside(ctx context.Context) []string {
	var found []string
	failed := func(what string, err error) {
		found = append(found, fmt.Sprintf("teardown check failed: host view of %s: %s: %v", h.box, what, err))
	}
	box, err := inspect(ctx, h.box)
	if err != nil {
		failed("inspect", err)
		return found
	}
	key := []byte(h.key)
	for _, e := range box.Config.Env {
		if strings.Contains(e, h.key) {
			name, _, _ := strings.Cut(e, "=")
			found = append(found, fmt.Sprintf("the instance's scoped key is in the box %s's environment (variable %s)", h.box, name))
		}
	}
	if out, err := dockerCLI(ctx, "top", h.box, "-eo", "pid"); err != nil {
		failed("processes", err)
	} else {
		for _, l := range strings.Split(string(out), "\n")[1:] {
			pid, err := strconv.Atoi(strings.TrimSpace(l))
			if err != nil {
				continue
			}
			for _, f := range []string{"cmdline", "environ"} {
				if b := bounded.ReadFile(fmt.Sprintf("/proc/%d/%s", pid, f), 1<<20); bytes.Contains(b, key) {
					found = append(found, fmt.Sprintf("the instance's scoped key is in the %s of process %d of the box %s", f, pid, h.box))
				}
			}
		}
	}
	if files, err := filesHolding(ctx, h.box, key); err != nil {
		failed("files", err)
	} else {
		for _, f := range files {
			found = append(found, fmt.Sprintf("the instance's scoped key is in file %s of the box %s", f, h.box))
		}
	}
	eg, err := inspect(ctx, h.egress)
	if err != nil {
		failed("egress sidecar", err)
		return found
	}
	if box.HostConfig.NetworkMode != "container:"+eg.ID {
		found = append(found, fmt.Sprintf("the box %s has a network of its own (%s), not only its egress sidecar's", h.box, box.HostConfig.NetworkMode))
	}
	for name, n := range eg.NetworkSettings.Networks {
		b, err := dockerCLI(ctx, "network", "inspect", "--format", "{{.Internal}}", n.NetworkID)
		if err != nil {
			failed("sidecar network "+name, err)
			continue
		}
		if strings.TrimSpace(string(b)) != "true" {
			found = append(found, fmt.Sprintf("the egress sidecar %s is on network %s, which is not internal (a route off the machine)", h.egress, name))
		}
	}
	return found
}

// filesHolding scans the box's filesystem as `docker export` gives it (the
// root filesystem, not tmpfs or volumes) for the key.
func filesHolding(ctx context.Context, box string, key []byte) ([]string, error) {
	cmd := exec.CommandContext(ctx, "docker", "export", box)
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	var found []string
	tr := tar.NewReader(io.LimitReader(out, 2<<30))
	var scanErr error
	for {
		hd, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			scanErr = err
			break
		}
		if hd.Typeflag != tar.TypeReg || hd.Size > 256<<20 {
			continue
		}
		b, err := io.ReadAll(tr)
		if err != nil {
			scanErr = err
			break
		}
		if bytes.Contains(b, key) {
			found = append(found, "/"+strings.TrimPrefix(hd.Name, "/"))
		}
	}
	_, _ = io.Copy(io.Discard, out)
	if err := cmd.Wait(); err != nil && scanErr == nil {
		scanErr = err
	}
	return found, scanErr
}

// after checks the containers are gone and the key is refused.
func (h *hostView) after(ctx context.Context, api *client) []string {
	found := h.notes
	for _, name := range []string{h.box, h.egress} {
		out, err := dockerCLI(ctx, "ps", "--all", "--quiet", "--filter", "name=^/"+name+"$")
		switch {
		case err != nil:
			found = append(found, fmt.Sprintf("teardown check failed: listing %s: %v", name, err))
		case len(bytes.TrimSpace(out)) > 0:
			found = append(found, fmt.Sprintf("container %s survived the forced delete", name))
		}
	}
	if !h.keyWorked {
		return found
	}
	status, err := api.call(ctx, http.MethodGet, h.cfg.KeyCheckPath, h.key, nil, nil, 0)
	var ae *apiError
	switch {
	case errors.As(err, &ae) && (ae.status == http.StatusUnauthorized || ae.status == http.StatusForbidden):
	case err == nil:
		found = append(found, fmt.Sprintf("the instance's scoped key is still accepted after the forced delete (GET %s answered %d)", h.cfg.KeyCheckPath, status))
	default:
		found = append(found, fmt.Sprintf("teardown check failed: GET %s with the revoked key: %v", h.cfg.KeyCheckPath, err))
	}
	return found
}

// boxIDs lists the instance IDs of the boxes on the engine, by the host
// view's box name (sandbox-${ID}).
func boxIDs(ctx context.Context, cfg *targets.GatewayHost) (map[string]bool, error) {
	prefix, suffix, _ := strings.Cut(cfg.Box, "${ID}")
	ePrefix, eSuffix, _ := strings.Cut(cfg.Egress, "${ID}")
	out, err := dockerCLI(ctx, "ps", "--all", "--format", "{{.Names}}")
	if err != nil {
		return nil, err
	}
	ids := map[string]bool{}
	for _, n := range strings.Fields(string(out)) {
		if strings.HasPrefix(n, ePrefix) && strings.HasSuffix(n, eSuffix) {
			continue // a sidecar, whose name may also match the box's pattern
		}
		if strings.HasPrefix(n, prefix) && strings.HasSuffix(n, suffix) && len(n) > len(prefix)+len(suffix) {
			id := n[len(prefix) : len(n)-len(suffix)]
			if idPattern.MatchString(id) {
				ids[id] = true
			}
		}
	}
	return ids, nil
}
