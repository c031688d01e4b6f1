package docker

import (
	"path"
	"slices"
	"strings"

	"github.com/moby/moby/api/types/container"

	"github.com/sandcheck/sandcheck/internal/hostmounts"
	"github.com/sandcheck/sandcheck/runners"
)

// pseudoFS are the file system types that hold no files a box could plant
// (kernel interfaces, graded by their own probes).
var pseudoFS = []string{"proc", "sysfs", "cgroup", "cgroup2", "devpts", "mqueue", "debugfs", "tracefs",
	"securityfs", "pstore", "bpf", "configfs", "fusectl", "binfmt_misc", "autofs", "efivarfs", "nsfs", "rpc_pipefs"}

// maxSubmounts bounds the submounts one container's view lists.
const maxSubmounts = 256

// hostSubmounts lists the writable mounts of the container's own mount
// table (table, read from its init) that lie under one of its binds and
// that the engine does not list itself: the host's submounts a bind took
// along (Docker binds recursively and applies ro to the top mount only, so
// `-v /:/host:ro` keeps /host/dev/shm and /host/var/lib/docker writable).
// Each is a bind of the host path the submount came from (the bind's
// source joined with the path below its destination).
func hostSubmounts(points []container.MountPoint, tmpfs map[string]string, table []hostmounts.Mount) []runners.Mount {
	own := map[string]bool{runners.ProbeMount: true}
	for _, m := range points {
		own[path.Clean(m.Destination)] = true
	}
	for dst := range tmpfs {
		own[path.Clean(dst)] = true
	}
	var out []runners.Mount
	seen := map[string]bool{}
	for _, t := range table {
		dst := path.Clean(t.Target)
		if t.ReadOnly || own[dst] || seen[dst] || slices.Contains(pseudoFS, t.FSType) {
			continue
		}
		bind, ok := enclosingBind(points, dst)
		if !ok {
			continue
		}
		rel := strings.TrimPrefix(dst, path.Clean(bind.Destination))
		seen[dst] = true
		out = append(out, runners.Mount{Type: "bind", Source: path.Join(bind.Source, rel), Destination: dst})
		if len(out) == maxSubmounts {
			break
		}
	}
	return out
}

// enclosingBind is the bind whose destination holds dst most closely (dst
// strictly below it).
func enclosingBind(points []container.MountPoint, dst string) (container.MountPoint, bool) {
	var best container.MountPoint
	found := false
	for _, m := range points {
		if m.Type != "bind" || m.Source == "" {
			continue
		}
		d := path.Clean(m.Destination)
		under := d == "/" || strings.HasPrefix(dst, d+"/")
		if under && dst != d && (!found || len(d) > len(path.Clean(best.Destination))) {
			best, found = m, true
		}
	}
	return best, found
}
