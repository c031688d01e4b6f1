package impl

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sandcheck/sandcheck/probes"
)

func init() {
	register(map[string]Func{"host.engine-socket": engineSocket})
}

// engineSockets are where container engines listen by default.
var engineSockets = []string{
	"/var/run/docker.sock", "/run/docker.sock",
	"/run/containerd/containerd.sock", "/var/run/containerd/containerd.sock",
	"/run/k3s/containerd/containerd.sock", "/var/snap/microk8s/common/run/containerd.sock",
	"/run/crio/crio.sock", "/var/run/crio/crio.sock",
	"/run/podman/podman.sock", "/var/run/podman/podman.sock",
	"/run/buildkit/buildkitd.sock", "/var/run/cri-dockerd.sock", "/run/cri-dockerd.sock",
	"/var/run/dockershim.sock", "/run/dockershim.sock",
}

// engineSocketGlobs are rootless engines' per-user sockets.
var engineSocketGlobs = []string{"/run/user/*/docker.sock", "/run/user/*/podman/podman.sock"}

const (
	engineTimeout   = 2 * time.Second
	engineReadMax   = 512
	engineMaxDirEnt = 256 // entries looked at in each mounted directory
	engineMaxReport = 8
)

// engineKind guesses the engine from the socket's name. Only docker and
// podman (which speaks the docker API) get the read-only /_ping; the others
// speak gRPC, and an accepted connection is proof enough.
func engineKind(path string) string {
	b := strings.ToLower(filepath.Base(path))
	switch {
	case strings.Contains(b, "podman"):
		return "podman"
	case strings.Contains(b, "dockershim"), strings.Contains(b, "cri-dockerd"):
		return "cri"
	case strings.Contains(b, "docker"):
		return "docker"
	case strings.Contains(b, "containerd"):
		return "containerd"
	case strings.Contains(b, "crio"):
		return "cri-o"
	case strings.Contains(b, "buildkit"):
		return "buildkit"
	}
	return "unknown"
}

// socketCandidates returns the socket files among the well-known paths, the
// mount targets (a socket bound in under any name) and the first entries of
// mounted directories (a host /run bound in).
func socketCandidates() []string {
	paths := append([]string{}, engineSockets...)
	for _, g := range engineSocketGlobs {
		m, _ := filepath.Glob(g)
		paths = append(paths, m...)
	}
	ms, _ := readMountinfo()
	for _, m := range ms {
		if pseudoFSTypes[m.FSType] || m.Target == "/" {
			continue
		}
		paths = append(paths, m.Target)
		paths = append(paths, dirSockets(m.Target)...)
	}
	seen := map[[2]uint64]bool{}
	var out []string
	for _, p := range paths {
		var st unix.Stat_t
		if unix.Lstat(p, &st) != nil || st.Mode&unix.S_IFMT != unix.S_IFSOCK {
			continue
		}
		id := [2]uint64{uint64(st.Dev), st.Ino}
		if !seen[id] {
			seen[id] = true
			out = append(out, p)
		}
	}
	sort.Strings(out)
	return out
}

// dirSockets lists sockets directly inside dir, without following links.
func dirSockets(dir string) []string {
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil
	}
	f := os.NewFile(uintptr(fd), dir)
	defer f.Close()
	ents, _ := f.ReadDir(engineMaxDirEnt)
	var out []string
	for _, d := range ents {
		if d.Type()&os.ModeSocket != 0 {
			out = append(out, filepath.Join(dir, d.Name()))
		}
	}
	return out
}

// engineSocket connects to every engine socket it finds. An accepted
// connection is an escape (the box can talk to the engine, which is root on
// the host); refused or permission denied is blocked for that socket.
func engineSocket(ctx context.Context, _ probes.Params) probes.Result {
	socks := socketCandidates()
	e := ev{}
	e.setInt("sockets_found", len(socks))
	if len(socks) == 0 {
		return blocked("no container-engine socket in the box", e)
	}
	var reached, unknown []string
	for i, s := range socks {
		kind := engineKind(s)
		state, o := trySocket(ctx, s, kind)
		if i < engineMaxReport {
			e.set(fmt.Sprintf("socket.%d", i+1), fmt.Sprintf("%s [%s] %s", s, kind, state))
		}
		switch o {
		case probes.Escaped:
			reached = append(reached, s)
		case probes.Inconclusive:
			unknown = append(unknown, s)
		}
	}
	switch {
	case len(reached) > 0:
		return escaped("container-engine socket(s) accept connections: "+strings.Join(reached, ", "), e)
	case len(unknown) > 0:
		return inconclusive("could not tell whether these sockets accept connections: "+strings.Join(unknown, ", "), e)
	}
	return blocked("engine socket(s) present but connections are refused", e)
}

// trySocket dials one socket and, for the docker API, sends the read-only
// GET /_ping and keeps the status line and version header of the answer.
func trySocket(ctx context.Context, path, kind string) (string, probes.Outcome) {
	d := net.Dialer{Timeout: engineTimeout}
	c, err := d.DialContext(ctx, "unix", path)
	if err != nil {
		n, _ := errnoOf(err)
		if n == unix.ECONNREFUSED || refusedErrno(n) {
			return "refused: " + errnoLabel(n), probes.Blocked
		}
		return "connect failed: " + err.Error(), probes.Inconclusive
	}
	defer c.Close()
	if kind != "docker" && kind != "podman" {
		return "connection accepted", probes.Escaped
	}
	_ = c.SetDeadline(time.Now().Add(engineTimeout))
	if _, err := io.WriteString(c, "GET /_ping HTTP/1.0\r\n\r\n"); err != nil {
		return "connection accepted; ping not sent: " + err.Error(), probes.Escaped
	}
	return "connection accepted; " + pingAnswer(io.LimitReader(c, engineReadMax)), probes.Escaped
}

// pingAnswer summarises an HTTP answer: status line and API version.
func pingAnswer(r io.Reader) string {
	sc := bufio.NewScanner(r)
	var status, version string
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if status == "" {
			status = line
			continue
		}
		if k, v, ok := strings.Cut(line, ":"); ok && strings.EqualFold(k, "Api-Version") {
			version = strings.TrimSpace(v)
		}
		if line == "" {
			break
		}
	}
	if status == "" {
		if err := sc.Err(); err != nil && !errors.Is(err, io.EOF) {
			return "no answer: " + err.Error()
		}
		return "no answer"
	}
	if version != "" {
		return fmt.Sprintf("answered %q (api %s)", clip(status, 64), clip(version, 16))
	}
	return fmt.Sprintf("answered %q", clip(status, 64))
}
