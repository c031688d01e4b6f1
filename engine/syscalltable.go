package engine

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"

	"github.com/elastic/go-seccomp-bpf/arch"

	"github.com/sandcheck/sandcheck/evidence"
	"github.com/sandcheck/sandcheck/probes"
)

// kallsymsPath is the kernel's symbol table; its __x64_sys_* entries are the
// syscalls the running kernel has built in.
const kallsymsPath = "/proc/kallsyms"

// maxKallsyms bounds the read of the symbol table (about 15 MB here).
const maxKallsyms = 64 << 20

var (
	kernelSyscallsOnce sync.Once
	kernelSyscalls     map[string]bool // nil when the table could not be read
)

// builtInSyscalls reads, once, which syscalls the host kernel has built in.
func builtInSyscalls() map[string]bool {
	kernelSyscallsOnce.Do(func() {
		f, err := os.Open(kallsymsPath)
		if err != nil {
			return
		}
		defer f.Close()
		kernelSyscalls = parseKallsyms(io.LimitReader(f, maxKallsyms))
	})
	return kernelSyscalls
}

// parseKallsyms picks the x86-64 syscall entry points ("ADDR T
// __x64_sys_NAME") out of a kallsyms listing; nil when there are none (a
// listing that hides them proves nothing).
func parseKallsyms(r io.Reader) map[string]bool {
	out := map[string]bool{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 4096), 4096)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 3 || (f[1] != "T" && f[1] != "t") {
			continue
		}
		if name, ok := strings.CutPrefix(f[2], "__x64_sys_"); ok {
			out[name] = true
		}
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

// syscallTableFact is the host's word on a syscalls.* probe that called
// itself not applicable: the probe's syscall is in or absent from the
// running kernel's table. Only a syscall the kernel really lacks confirms
// "not-applicable"; one it has built in contradicts the probe, so its
// claim is left unconfirmed (a box that lies "io_uring is not built into
// this kernel" to hide a seccomp profile that lets io_uring through must
// not pass). The second result is false when the fact does not apply.
func syscallTableFact(spec probes.Spec, self selfReport, table map[string]bool) (evidence.Item, bool) {
	name, ok := strings.CutPrefix(spec.ID, "syscalls.")
	if !ok || self.Outcome != probes.NotApplicable {
		return evidence.Item{}, false
	}
	name = strings.ReplaceAll(name, "-", "_")
	it := evidence.Item{Source: evidence.SourceKernel, Kind: "kernel-syscall-table", Data: map[string]string{"syscall": name}}
	switch {
	case table == nil:
		it.Summary = "the host could not read the kernel's syscall table (" + kallsymsPath + "): the probe's not-applicable is unconfirmed"
	case func() bool { _, known := arch.X86_64.SyscallNames[name]; return !known }():
		it.Summary = fmt.Sprintf("%s is not an x86-64 syscall name: the host cannot confirm the probe's not-applicable", name)
	case table[name]:
		it.Summary = fmt.Sprintf("the host kernel has %s built in (%s lists __x64_sys_%s): the probe's not-applicable contradicts the host", name, kallsymsPath, name)
	default:
		it.Summary = fmt.Sprintf("the host kernel has no %s (%s lists no __x64_sys_%s)", name, kallsymsPath, name)
		it.Indicates = probes.NotApplicable
	}
	return it, true
}
