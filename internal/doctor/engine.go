package doctor

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"slices"
	"strings"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/client"
)

// engine is the part of the Docker engine's API the checks use.
type engine interface {
	// Info describes the engine.
	Info(ctx context.Context) (engineInfo, error)
	// Image returns an image's ID and labels, or errImageNotFound.
	Image(ctx context.Context, ref string) (id string, labels map[string]string, err error)
}

// engineInfo is what the checks need from the engine's description.
type engineInfo struct {
	Host            string // where the engine was reached (unix:///var/run/docker.sock)
	ServerVersion   string
	Driver          string // storage driver
	CgroupVersion   string
	SecurityOptions []string // "name=seccomp,profile=default", ...
	Runtimes        map[string]runtimeInfo
}

// runtimeInfo is one OCI runtime registered with the engine.
type runtimeInfo struct {
	Path string
	Args []string
}

var errImageNotFound = errors.New("image not found")

// mobyEngine reaches the engine the way the docker runner does (DOCKER_HOST or
// the default socket), so the doctor sees what the docker runner will see.
type mobyEngine struct {
	c *client.Client
}

func newMobyEngine() (*mobyEngine, error) {
	c, err := client.New(client.FromEnv)
	if err != nil {
		return nil, fmt.Errorf("creating a Docker client: %w", err)
	}
	return &mobyEngine{c: c}, nil
}

func (e *mobyEngine) Close() error { return e.c.Close() }

func (e *mobyEngine) Info(ctx context.Context) (engineInfo, error) {
	res, err := e.c.Info(ctx, client.InfoOptions{})
	if err != nil {
		return engineInfo{}, fmt.Errorf("asking %s for its info: %w", e.c.DaemonHost(), err)
	}
	in := res.Info
	out := engineInfo{
		Host:            e.c.DaemonHost(),
		ServerVersion:   in.ServerVersion,
		Driver:          in.Driver,
		CgroupVersion:   in.CgroupVersion,
		SecurityOptions: in.SecurityOptions,
		Runtimes:        make(map[string]runtimeInfo, len(in.Runtimes)),
	}
	for name, rt := range in.Runtimes {
		out.Runtimes[name] = runtimeInfo{Path: rt.Path, Args: rt.Args}
	}
	return out, nil
}

func (e *mobyEngine) Image(ctx context.Context, ref string) (string, map[string]string, error) {
	res, err := e.c.ImageInspect(ctx, ref)
	if cerrdefs.IsNotFound(err) {
		return "", nil, errImageNotFound
	}
	if err != nil {
		return "", nil, fmt.Errorf("inspecting image %s: %w", ref, err)
	}
	var labels map[string]string
	if res.Config != nil {
		labels = res.Config.Labels
	}
	return res.ID, labels, nil
}

const fixStartEngine = "start the Docker engine: run `make setup` as root (or `setsid -f dockerd >/var/log/sandcheck-dockerd.log 2>&1`)"

func checkEngine(_ system, info engineInfo, err error) Check {
	c := Check{Name: "docker-engine"}
	if err != nil {
		c.Status, c.Detail, c.Fix = Missing, "not reachable: "+oneLine(err.Error()), fixStartEngine
		if errors.Is(err, fs.ErrPermission) || strings.Contains(err.Error(), "permission denied") {
			c.Fix = "run as root (the engine's socket is root-only), or join the docker group"
		}
		return c
	}
	var parts []string
	if info.Driver != "" {
		parts = append(parts, "storage "+info.Driver)
	}
	if info.CgroupVersion != "" {
		parts = append(parts, "cgroup v"+info.CgroupVersion)
	}
	seccomp := slices.ContainsFunc(info.SecurityOptions, func(o string) bool {
		return strings.Contains(o, "name=seccomp")
	})
	if seccomp {
		parts = append(parts, "seccomp")
	}
	c.Detail = fmt.Sprintf("Docker %s at %s", info.ServerVersion, info.Host)
	if len(parts) > 0 {
		c.Detail += " (" + strings.Join(parts, ", ") + ")"
	}
	c.Status = OK
	if !seccomp {
		c.Status = Warn
		c.Detail += "; no seccomp support: hardened targets cannot apply a seccomp profile"
		c.Fix = "use a Docker engine built with seccomp (Debian's docker.io: `make setup`)"
	}
	return c
}

// runsc needs --oci-seccomp to apply the container's seccomp profile; without
// it a hardened target under gVisor would pass its seccomp probes for the
// wrong reason.
var runscArgs = []string{"--network=host", "--oci-seccomp"}

func checkRuntime(name string, info engineInfo, infoErr error) Check {
	c := Check{Name: "runtime-" + name}
	if infoErr != nil {
		c.Status, c.Detail, c.Fix = Warn, "could not tell: the Docker engine is not reachable", fixStartEngine
		return c
	}
	rt, ok := info.Runtimes[name]
	if !ok {
		c.Status, c.Detail = Missing, name+" is not registered with the Docker engine"
		if name == "runsc" {
			c.Fix = `install runsc and register it in /etc/docker/daemon.json as {"runtimes": {"runsc": {"path": "/usr/bin/runsc", "runtimeArgs": ["--network=host", "--oci-seccomp"]}}} (make setup)`
		} else {
			c.Fix = "install docker.io, whose default runtime is runc (make setup)"
		}
		return c
	}
	c.Status, c.Detail = OK, describeRuntime(rt)
	if name == "runsc" && !slices.Contains(rt.Args, "--oci-seccomp") {
		c.Status = Warn
		c.Detail += "; without --oci-seccomp gVisor ignores the containers' seccomp profiles"
		c.Fix = `set "runtimeArgs": ["` + strings.Join(runscArgs, `", "`) + `"] for runsc in /etc/docker/daemon.json and reload dockerd (make setup)`
	}
	return c
}

func describeRuntime(rt runtimeInfo) string {
	if rt.Path == "" {
		return "registered"
	}
	if len(rt.Args) == 0 {
		return rt.Path
	}
	return rt.Path + " " + strings.Join(rt.Args, " ")
}

func checkRunnerImage(ctx context.Context, s system, infoErr error) Check {
	c := Check{Name: "runner-image"}
	if infoErr != nil {
		c.Status, c.Detail, c.Fix = Warn, "could not tell: the Docker engine is not reachable", fixStartEngine
		return c
	}
	ctx, cancel := context.WithTimeout(ctx, engineTimeout)
	defer cancel()
	id, labels, err := s.engine.Image(ctx, RunnerImage)
	switch {
	case errors.Is(err, errImageNotFound):
		c.Status, c.Detail, c.Fix = Missing, RunnerImage+" is not in the engine's image store", "build it: make images"
	case err != nil:
		c.Status, c.Detail, c.Fix = Warn, "could not tell: "+oneLine(err.Error()), fixStartEngine
	default:
		c.Status, c.Detail = OK, RunnerImage+" "+shortID(id)
		if in := labels["dev.sandcheck.inputs"]; in != "" {
			c.Detail += " (inputs " + shortID(in) + ")"
		}
	}
	return c
}

// shortID shortens "sha256:0123456789abcdef..." to "sha256:0123456789ab".
func shortID(id string) string {
	algo, hex, ok := strings.Cut(id, ":")
	if !ok {
		algo, hex = "", id
	}
	if len(hex) > 12 {
		hex = hex[:12]
	}
	if algo == "" {
		return hex
	}
	return algo + ":" + hex
}

// oneLine keeps a detail to one line: engines and kernels put newlines in
// their errors.
func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}
