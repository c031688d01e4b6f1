package reports

import (
	"bytes"
	"crypto/sha256"
	"fmt"
	"io"
	"os"
	"strings"
)

// maxTargetBytes bounds how much of a target file the reports read to find
// the line of a key; target files are small.
const maxTargetBytes = 1 << 20

// targetSource returns the bytes of the record's target file when the file
// on disk is still the one the run used (its sha256 matches the record's
// digest), else nil: a line number into a changed file would point at the
// wrong thing.
func targetSource(path, digest string) []byte {
	if path == "" || digest == "" {
		return nil
	}
	f, err := os.Open(path)
	if err != nil {
		return nil
	}
	defer f.Close()
	var b bytes.Buffer
	if _, err := b.ReadFrom(io.LimitReader(f, maxTargetBytes+1)); err != nil || b.Len() > maxTargetBytes {
		return nil
	}
	if fmt.Sprintf("sha256:%x", sha256.Sum256(b.Bytes())) != digest {
		return nil
	}
	return b.Bytes()
}

// keyLine returns the 1-based line of the block-style YAML key path (e.g.
// "docker", "cap_add") in src, or 0 when a key is absent. It reads
// indentation only, which is all target files use; flow mappings and
// anchors are not followed.
func keyLine(src []byte, path ...string) int {
	if len(path) == 0 {
		return 0
	}
	depth, parentIndent := 0, -1
	for i, line := range strings.Split(string(src), "\n") {
		trimmed := strings.TrimLeft(line, " ")
		if trimmed == "" || strings.HasPrefix(trimmed, "#") {
			continue
		}
		indent := len(line) - len(trimmed)
		if depth > 0 && indent <= parentIndent {
			return 0 // left the parent's block without finding the key
		}
		if strings.HasPrefix(trimmed, path[depth]+":") {
			if depth == len(path)-1 {
				return i + 1
			}
			depth++
			parentIndent = indent
		}
	}
	return 0
}

// locator is where a finding about a probe or criterion sits in the target
// file: the key a fix changes, under the runner's section.
type locator struct {
	src    []byte
	runner string
}

// line returns the target file line for a probe (or, with probe "", a
// criterion), falling back to the runner's section and then to line 1.
func (l locator) line(probe, criterion string) int {
	if l.src == nil {
		return 1
	}
	for _, key := range targetKeys(probe, criterion) {
		if n := keyLine(l.src, l.runner, key); n > 0 {
			return n
		}
		if n := keyLine(l.src, key); n > 0 {
			return n
		}
	}
	if n := keyLine(l.src, l.runner); n > 0 {
		return n
	}
	return 1
}

// probeKeys maps a probe ID or a category prefix ("syscalls.") to the target
// keys that decide it, most specific first.
var probeKeys = []struct {
	prefix string
	keys   []string
}{
	{"privilege.root-uid", []string{"user"}},
	{"privilege.uid0-host-mapped", []string{"user", "userns"}},
	{"privilege.dangerous-caps", []string{"cap_add", "cap_drop"}},
	{"privilege.no-new-privs", []string{"no_new_privileges"}},
	{"privilege.setuid-binaries", []string{"no_new_privileges"}},
	{"privilege.lsm", []string{"apparmor"}},
	{"privilege.ptrace-other", []string{"cap_add", "seccomp"}},
	{"privilege.", []string{"seccomp", "cap_add"}},
	{"syscalls.", []string{"seccomp", "cap_add"}},
	{"host.proc-unmasked", []string{"system_paths"}},
	{"host.sysrq-trigger", []string{"system_paths"}},
	{"host.kallsyms", []string{"system_paths"}},
	{"host.core-pattern", []string{"system_paths"}},
	{"host.release-agent", []string{"system_paths", "cap_add"}},
	{"host.pid-namespace", []string{"pid"}},
	{"host.proc1-root", []string{"pid"}},
	{"host.dev-kmsg", []string{"devices"}},
	{"host.block-devices", []string{"devices"}},
	{"host.mknod", []string{"cap_add", "cap_drop"}},
	{"host.", []string{"mounts"}},
	{"secrets.env-secret-shape", []string{"env"}},
	{"secrets.proc-environ", []string{"env"}},
	{"secrets.agent-socket", []string{"mounts", "env"}},
	{"secrets.scoped-key", []string{"env"}},
	{"secrets.", []string{"mounts"}},
	{"metadata.", []string{"network", "egress"}},
	{"egress.", []string{"egress", "network"}},
	{"resources.fork-bomb", []string{"pids_limit"}},
	{"resources.thread-bomb", []string{"pids_limit"}},
	{"resources.memory", []string{"memory"}},
	{"resources.cpu-deadline", []string{"cpus"}},
	{"resources.shm-fill", []string{"shm_size"}},
	{"resources.fd-exhaustion", []string{"ulimits"}},
	{"resources.rootfs-fill", []string{"read_only_rootfs", "storage"}},
	{"resources.", []string{"tmpfs", "memory"}},
	{"persistence.rootfs-write", []string{"read_only_rootfs"}},
	{"persistence.inputs-writable", []string{"inputs"}},
	{"persistence.scratch-unlimited", []string{"tmpfs"}},
	{"persistence.", []string{"launch", "tmpfs"}},
	{"output.", []string{"output"}},
	{"workload.read-inputs", []string{"inputs"}},
	{"workload.write-outputs", []string{"output"}},
	{"attribution.", []string{"hostname", "name"}},
	{"fingerprint.", []string{"runtime"}},
	{"teardown.", []string{"launch", "runtime"}},
}

// criterionKeys maps a release criterion to the target keys that decide it,
// for findings that name no probe.
var criterionKeys = map[string][]string{
	"no-ambient-cloud-identity": {"network", "env"},
	"no-host-mount":             {"mounts"},
	"bounded-resources":         {"pids_limit", "memory", "cpus"},
	"default-deny-egress":       {"egress", "network"},
	"immutable-approved-base":   {"read_only_rootfs", "image"},
	"isolated-scratch":          {"tmpfs", "launch"},
	"controlled-output":         {"output"},
	"attributable-policy":       {"profile"},
	"verified-teardown":         {"launch"},
	"hardened-runtime":          {"runtime", "seccomp", "cap_drop"},
	"usability":                 {"image"},
}

func targetKeys(probe, criterion string) []string {
	var keys []string
	if probe != "" {
		for _, pk := range probeKeys {
			if probe == pk.prefix || (strings.HasSuffix(pk.prefix, ".") && strings.HasPrefix(probe, pk.prefix)) {
				keys = append(keys, pk.keys...)
				break
			}
		}
	}
	return append(keys, criterionKeys[criterion]...)
}
