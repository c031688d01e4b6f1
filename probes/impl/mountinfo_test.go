package impl

import (
	"strings"
	"testing"
)

// runcWeak is mountinfo from runc with a host folder, the docker socket and
// the probe directory bound in (trimmed from a real run).
const runcWeak = `72 48 0:38 / / rw,relatime master:2 - overlay overlay rw,lowerdir=/var/lib/docker/overlay2/l/A
73 72 0:41 / /proc rw,nosuid,nodev,noexec,relatime - proc proc rw
74 72 0:42 / /dev rw,nosuid - tmpfs tmpfs rw,size=65536k,mode=755
76 72 0:44 / /sys ro,nosuid,nodev,noexec,relatime - sysfs sysfs ro
78 77 0:28 /docker/5217 /sys/fs/cgroup/cpu ro,nosuid,nodev,noexec,relatime - cgroup cgroup rw,cpu
88 74 0:46 / /dev/shm rw,nosuid,nodev,noexec,relatime - tmpfs shm rw,size=65536k
89 72 254:0 /var/lib/docker/containers/5217/resolv.conf /etc/resolv.conf rw,relatime - ext4 /dev/vda rw
90 72 254:0 /var/lib/docker/containers/5217/hostname /etc/hostname rw,relatime - ext4 /dev/vda rw
91 72 254:0 /var/lib/docker/containers/5217/hosts /etc/hosts rw,relatime - ext4 /dev/vda rw
92 72 254:0 /tmp/probe /.sandcheck ro,relatime - ext4 /dev/vda rw
93 72 254:0 /tmp/host\040share /hostshare rw,relatime - ext4 /dev/vda rw
94 72 0:23 /docker.sock /var/run/docker.sock rw,nosuid,nodev - tmpfs tmpfs rw,mode=755
49 73 0:41 /bus /proc/bus ro,nosuid,nodev,noexec,relatime - proc proc rw
54 73 0:42 /null /proc/keys rw,nosuid - tmpfs tmpfs rw,size=65536k,mode=755
56 76 0:48 / /sys/firmware ro,relatime - tmpfs tmpfs ro
`

// gvisorHard is mountinfo from runsc: 9p root and /etc files, an empty
// optional-fields list written as two spaces, tmpfs scratch.
const gvisorHard = `8 8 0:8 / / ro  - 9p none ro,trans=fd,rfdno=4,wfdno=4,aname=/
9 8 0:6 / /dev rw  - tmpfs none rw,mode=0755
10 8 0:9 / /sys ro,noexec  - sysfs none ro,dentry_cache_limit=1000
11 8 0:10 / /proc rw,noexec  - proc none rw,dentry_cache_limit=1000
13 9 0:12 / /dev/shm rw,noexec  - tmpfs none rw,mode=1777,size=67108864
14 8 0:13 / /etc/hosts rw  - 9p none rw,trans=fd,rfdno=7,wfdno=7,aname=/
15 8 0:14 / /etc/hostname rw  - 9p none rw,trans=fd,rfdno=6,wfdno=6,aname=/
16 8 0:15 / /etc/resolv.conf rw  - 9p none rw,trans=fd,rfdno=5,wfdno=5,aname=/
17 8 0:16 / /.sandcheck ro  - 9p none ro,trans=fd,rfdno=8,wfdno=8,aname=/
18 8 0:17 / /tmp rw  - tmpfs none rw,mode=01777
`

func TestParseMountinfo(t *testing.T) {
	ms, err := parseMountinfo(strings.NewReader(runcWeak))
	if err != nil {
		t.Fatal(err)
	}
	if len(ms) != 15 {
		t.Fatalf("got %d mounts, want 15", len(ms))
	}
	hs := ms[10]
	if hs.Target != "/hostshare" || hs.Root != "/tmp/host share" || hs.FSType != "ext4" || hs.ReadOnly() {
		t.Errorf("host share parsed as %+v", hs)
	}
	g, err := parseMountinfo(strings.NewReader(gvisorHard))
	if err != nil {
		t.Fatal(err)
	}
	if g[0].FSType != "9p" || !g[0].ReadOnly() || g[8].Target != "/.sandcheck" {
		t.Errorf("gVisor lines parsed as %+v / %+v", g[0], g[8])
	}
	if _, err := parseMountinfo(strings.NewReader("1 2 3\n")); err == nil {
		t.Error("a short line parsed without error")
	}
}

func TestHostMounts(t *testing.T) {
	tests := []struct {
		name, info, probeDir string
		want                 []string
	}{
		{"runc weak", runcWeak, "/.sandcheck", []string{"/hostshare", "/var/run/docker.sock"}},
		{"runc weak, probe dir not excluded", runcWeak, "", []string{"/.sandcheck", "/hostshare", "/var/run/docker.sock"}},
		{"gvisor hardened", gvisorHard, "/.sandcheck", nil},
		{"gvisor with host folder", gvisorHard + "19 8 0:18 / /data rw  - 9p none rw,aname=/\n", "/.sandcheck", []string{"/data"}},
		{"managed volumes", "1 0 0:1 / / rw - overlay o rw\n" +
			"2 1 254:0 /var/lib/docker/volumes/scratch/_data /scratch rw - ext4 /dev/vda rw\n" +
			"3 1 254:0 /volumes/v2/_data /v2 rw - ext4 /dev/vdb rw\n" +
			"4 1 254:0 /var/lib/kubelet/pods/0b1c2d3e-4f50-6172-8394-a5b6c7d8e9f0/volumes/kubernetes.io~empty-dir/w /work rw - ext4 /dev/vda rw\n" +
			"5 1 254:0 /var/lib/kubelet/pods/0b1c2d3e-4f50-6172-8394-a5b6c7d8e9f0/containers/c/1 /dev/termination-log rw - ext4 /dev/vda rw\n" +
			"6 1 254:0 /srv/volumes/data /data rw - ext4 /dev/vda rw\n", "", []string{"/data"}},
		{"nfs and fuse", "1 0 0:1 / / rw - overlay o rw\n2 1 0:50 / /mnt/nfs rw - nfs4 srv:/x rw\n3 1 0:51 / /mnt/s3 rw - fuse.s3fs s3fs rw\n", "", []string{"/mnt/nfs", "/mnt/s3"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ms, err := parseMountinfo(strings.NewReader(tt.info))
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, m := range hostMounts(ms, tt.probeDir) {
				got = append(got, m.Target)
			}
			if strings.Join(got, ",") != strings.Join(tt.want, ",") {
				t.Errorf("host mounts = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestUnderDir(t *testing.T) {
	tests := []struct {
		p, dir string
		want   bool
	}{
		{"/.sandcheck", "/.sandcheck", true},
		{"/.sandcheck/x", "/.sandcheck/", true},
		{"/.sandcheckx", "/.sandcheck", false},
		{"/a", "", false},
	}
	for _, tt := range tests {
		if got := underDir(tt.p, tt.dir); got != tt.want {
			t.Errorf("underDir(%q, %q) = %v", tt.p, tt.dir, got)
		}
	}
}
