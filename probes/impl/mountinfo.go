package impl

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
)

// mount is one line of /proc/self/mountinfo (proc(5)).
type mount struct {
	Root    string // path of the mount's root inside its filesystem
	Target  string // mount point, as the box sees it
	Options string // per-mount options (ro, nosuid...)
	Device  string // major:minor
	FSType  string
	Source  string
	Super   string // per-superblock options
}

// ReadOnly reports whether writes through this mount are refused.
func (m mount) ReadOnly() bool {
	return hasOpt(m.Options, "ro") || hasOpt(m.Super, "ro")
}

func hasOpt(opts, o string) bool {
	for _, x := range strings.Split(opts, ",") {
		if x == o {
			return true
		}
	}
	return false
}

// Limits on what we read of mountinfo; a box can have many mounts, but a
// hostile one must not make the probe allocate without bound.
const (
	maxMountLines = 10000
	maxMountLine  = 64 << 10
)

// readMountinfo parses /proc/self/mountinfo.
func readMountinfo() ([]mount, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil, fmt.Errorf("opening mountinfo: %w", err)
	}
	defer f.Close()
	return parseMountinfo(f)
}

// parseMountinfo reads mountinfo lines. Fields are split on runs of spaces:
// gVisor writes an empty optional-fields list as two spaces, and the fields
// themselves escape spaces as \040.
func parseMountinfo(r io.Reader) ([]mount, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 4096), maxMountLine)
	var out []mount
	for n := 1; sc.Scan(); n++ {
		if n > maxMountLines {
			return out, fmt.Errorf("parsing mountinfo: more than %d lines", maxMountLines)
		}
		f := strings.Fields(sc.Text())
		if len(f) == 0 {
			continue
		}
		sep := -1
		for i := 6; i < len(f); i++ {
			if f[i] == "-" {
				sep = i
				break
			}
		}
		if len(f) < 6 || sep < 0 || len(f) < sep+3 {
			return out, fmt.Errorf("parsing mountinfo line %d: %d fields, no separator", n, len(f))
		}
		m := mount{
			Device:  f[2],
			Root:    unescapeMount(f[3]),
			Target:  unescapeMount(f[4]),
			Options: f[5],
			FSType:  f[sep+1],
			Source:  unescapeMount(f[sep+2]),
		}
		if len(f) > sep+3 {
			m.Super = f[sep+3]
		}
		out = append(out, m)
	}
	if err := sc.Err(); err != nil {
		return out, fmt.Errorf("reading mountinfo: %w", err)
	}
	return out, nil
}

// unescapeMount undoes the kernel's octal escapes (\040 space, \011 tab,
// \012 newline, \134 backslash).
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+4 <= len(s) {
			if v, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(v))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// hostFSTypes are filesystems whose data lives outside the box: disks of the
// host, host folders passed through a VM or gVisor (9p, virtiofs), network
// shares. A mount of one of these, other than the root filesystem and the
// runtime's own files, is a window onto the host.
var hostFSTypes = map[string]bool{
	"ext2": true, "ext3": true, "ext4": true, "xfs": true, "btrfs": true, "zfs": true,
	"f2fs": true, "jfs": true, "reiserfs": true, "vfat": true, "exfat": true, "ntfs": true,
	"ntfs3": true, "fuseblk": true, "9p": true, "virtiofs": true, "nfs": true, "nfs4": true,
	"cifs": true, "smb3": true, "ceph": true, "glusterfs": true, "lustre": true,
	"gpfs": true, "ocfs2": true, "gfs2": true, "overlay": true, "aufs": true,
	"squashfs": true, "iso9660": true, "fuse.sshfs": true, "fuse.s3fs": true,
	"fuse.gcsfuse": true, "fuse.rclone": true, "fuse.juicefs": true, "fuse.mountpoint-s3": true,
}

// bindableFSTypes are in-memory filesystems that a runtime creates fresh for
// the box (tmpfs for /dev, /tmp, /dev/shm) but that a host can also bind a
// piece of into it (the host's /run holding docker.sock). A bind of one of
// them (root other than "/") whose device the box has no fresh mount of came
// from the host.
var bindableFSTypes = map[string]bool{
	"tmpfs": true, "ramfs": true, "devtmpfs": true, "proc": true, "sysfs": true,
}

// runtimeFiles are the files every container runtime binds in from the host
// for name resolution; they are the runtime's own, not a finding.
var runtimeFiles = map[string]bool{
	"/etc/hosts": true, "/etc/hostname": true, "/etc/resolv.conf": true,
}

// managedVolume matches the root (path inside its filesystem) of storage the
// runtime creates for the box rather than a host folder someone chose: Docker
// and Podman named volumes (<root>/volumes/<name>/_data) and a Kubernetes
// pod's own volumes and files (emptyDir, projected tokens, etc-hosts,
// termination-log under kubelet's pods/<uid>/). Whether such storage outlives
// the run is persistence.marker-next-run's question, not this one's. gVisor
// shows every mount's root as "/", so there nothing matches.
var managedVolume = regexp.MustCompile(`/volumes/[^/]+/_data(/|$)|/pods/[0-9a-f-]{36}/(volumes|volume-subpaths|containers|etc-hosts)(/|$)`)

// hostMounts returns the mounts that expose host data: see hostFSTypes and
// bindableFSTypes. The root filesystem, the runtime's name-resolution files,
// runtime-managed volumes and the harness's probe directory are left out.
func hostMounts(ms []mount, probeDir string) []mount {
	fresh := map[string]bool{} // devices the box has a whole mount of
	for _, m := range ms {
		if m.Root == "/" {
			fresh[m.Device] = true
		}
	}
	var out []mount
	for _, m := range ms {
		if m.Target == "/" || runtimeFiles[m.Target] || underDir(m.Target, probeDir) || managedVolume.MatchString(m.Root) {
			continue
		}
		switch {
		case hostFSTypes[m.FSType], strings.HasPrefix(m.FSType, "fuse.") && m.FSType != "fuse.lxcfs":
		case bindableFSTypes[m.FSType] && m.Root != "/" && !fresh[m.Device]:
		default:
			continue
		}
		out = append(out, m)
	}
	return out
}

// underDir reports whether p is dir or inside it; an empty dir matches nothing.
func underDir(p, dir string) bool {
	if dir == "" {
		return false
	}
	dir = filepath.Clean(dir)
	p = filepath.Clean(p)
	return p == dir || dir == "/" || strings.HasPrefix(p, dir+"/")
}

// pseudoFSTypes are kernel interfaces, not storage: walks skip them.
var pseudoFSTypes = map[string]bool{
	"proc": true, "sysfs": true, "devtmpfs": true, "devpts": true, "cgroup": true,
	"cgroup2": true, "debugfs": true, "tracefs": true, "securityfs": true, "bpf": true,
	"pstore": true, "configfs": true, "fusectl": true, "mqueue": true, "binfmt_misc": true,
	"hugetlbfs": true, "efivarfs": true, "nsfs": true, "autofs": true, "rpc_pipefs": true,
}
