package docker

import (
	"slices"
	"testing"

	"github.com/moby/moby/api/types/container"

	"github.com/sandcheck/sandcheck/internal/hostmounts"
	"github.com/sandcheck/sandcheck/runners"
)

// A read-only bind of / keeps the host's submounts writable (Docker's ro is
// not recursive): each rw one is listed as a bind of its host path; the
// read-only ones, the kernel interfaces, the container's own mounts and
// anything outside a bind are not.
func TestHostSubmountsOfAReadOnlyRootBind(t *testing.T) {
	points := []container.MountPoint{
		{Type: "bind", Source: "/", Destination: "/host", RW: false},
		{Type: "bind", Source: "/dev", Destination: "/dev", RW: true},
		{Type: "bind", Source: "/srv/probe", Destination: runners.ProbeMount, RW: false},
	}
	table := hostmounts.Parse([]byte(`1 0 0:1 / / rw - overlay overlay rw
2 1 8:1 / /host ro,relatime - ext4 /dev/vda1 rw
3 2 0:22 / /host/dev/shm rw,nosuid,nodev - tmpfs shm rw
4 2 8:1 /var/lib/docker /host/var/lib/docker rw,relatime - ext4 /dev/vda1 rw
5 2 0:5 / /host/proc rw - proc proc rw
6 2 0:30 / /host/boot ro - ext4 /dev/vda2 ro
7 2 0:31 / /host/mnt/ro-super rw - ext4 /dev/vda3 ro
8 1 0:40 / /dev rw - devtmpfs udev rw
9 8 0:41 / /dev/shm rw - tmpfs shm rw
10 8 0:42 / /dev/pts rw - devpts devpts rw
11 1 0:43 / /tmp rw - tmpfs tmpfs rw
12 1 8:1 /srv/probe /.sandcheck ro - ext4 /dev/vda1 rw
`))
	got := hostSubmounts(points, map[string]string{"/tmp": "rw"}, table)
	want := map[string]string{"/host/dev/shm": "/dev/shm", "/host/var/lib/docker": "/var/lib/docker", "/dev/shm": "/dev/shm"}
	if len(got) != len(want) {
		t.Fatalf("submounts %+v, want %v", got, want)
	}
	for _, m := range got {
		if src, ok := want[m.Destination]; !ok || m.Source != src || m.ReadOnly || m.Type != "bind" {
			t.Errorf("submount %+v, want %s from %s, writable", m, m.Destination, want[m.Destination])
		}
	}
	// Nothing under a bind: nothing listed.
	if got := hostSubmounts(points[2:], nil, table); len(got) != 0 {
		t.Errorf("submounts with no bind holding them: %+v", got)
	}
}

// The container's cgroup files are looked for under both drivers' layouts,
// per cgroup v1 controller or in v2's unified hierarchy.
func TestContainerCgroupFiles(t *testing.T) {
	got := containerCgroupFiles("abc", []string{"memory"}, "memory.oom_control")
	want := []string{"/sys/fs/cgroup/memory/docker/abc/memory.oom_control", "/sys/fs/cgroup/memory/system.slice/docker-abc.scope/memory.oom_control"}
	if !slices.Equal(got, want) {
		t.Errorf("v1: %v, want %v", got, want)
	}
	got = containerCgroupFiles("abc", nil, "cpu.stat")
	want = []string{"/sys/fs/cgroup/docker/abc/cpu.stat", "/sys/fs/cgroup/system.slice/docker-abc.scope/cpu.stat"}
	if !slices.Equal(got, want) {
		t.Errorf("v2: %v, want %v", got, want)
	}
}
