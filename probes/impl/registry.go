// Package impl carries out the probes of the catalog (probes/catalog/*.yaml)
// from inside a sandbox. Each family has its own file; registry.go maps every
// catalog ID to the function that carries it out, and Run applies the spec's
// time bound and the result limits around each one.
//
// The package never prints: the probe binary (cmd/sandcheck-probe) owns stdout
// and stderr. Work that needs a process of its own (the bombs, the user
// namespace child) re-executes the binary as "child <kind>", see Child.
package impl

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/sandcheck/sandcheck/probes"
)

// Func carries out one probe. It must honour ctx, leave nothing running and
// return a result whose Outcome and Evidence say what it saw; Run fills in the
// probe ID and makes the result fit the limits of probes.Result.
type Func func(ctx context.Context, p probes.Params) probes.Result

// registry holds one entry per catalog ID; registry_test.go checks that it
// covers the catalog exactly.
var registry = map[string]Func{
	"metadata.aws-imdsv1":           imdsV1,
	"metadata.aws-imdsv2":           imdsV2,
	"secrets.env-secret-shape":      envSecretShape,
	"host.honeyfile":                honeyfile,
	"host.bind-mounts":              bindMounts,
	"host.engine-socket":            engineSocket,
	"host.sysrq-trigger":            sysrqTrigger,
	"host.proc-unmasked":            procUnmasked,
	"host.mknod":                    hostMknod,
	"host.kallsyms":                 hostKallsyms,
	"privilege.root-uid":            rootUID,
	"privilege.dangerous-caps":      dangerousCaps,
	"privilege.no-new-privs":        noNewPrivs,
	"privilege.seccomp":             seccompMode,
	"privilege.userns-create":       usernsCreate,
	"privilege.mount-fs":            mountFS,
	"syscalls.bpf":                  sysBPF,
	"syscalls.perf-event-open":      sysPerfEventOpen,
	"syscalls.keyctl":               sysKeyctl,
	"syscalls.userfaultfd":          sysUserfaultfd,
	"syscalls.unshare":              sysUnshare,
	"syscalls.mount":                sysMount,
	"syscalls.io-uring-setup":       sysIOUringSetup,
	"syscalls.personality":          sysPersonality,
	"syscalls.add-key":              moreSyscallProbe("add_key"),
	"syscalls.request-key":          moreSyscallProbe("request_key"),
	"syscalls.setns":                moreSyscallProbe("setns"),
	"syscalls.umount2":              moreSyscallProbe("umount2"),
	"syscalls.pivot-root":           moreSyscallProbe("pivot_root"),
	"syscalls.clock-settime":        moreSyscallProbe("clock_settime"),
	"syscalls.settimeofday":         moreSyscallProbe("settimeofday"),
	"syscalls.adjtimex":             moreSyscallProbe("adjtimex"),
	"syscalls.swapon":               moreSyscallProbe("swapon"),
	"syscalls.swapoff":              moreSyscallProbe("swapoff"),
	"syscalls.reboot":               moreSyscallProbe("reboot"),
	"syscalls.acct":                 moreSyscallProbe("acct"),
	"syscalls.syslog":               moreSyscallProbe("syslog"),
	"syscalls.quotactl":             moreSyscallProbe("quotactl"),
	"syscalls.fanotify-init":        moreSyscallProbe("fanotify_init"),
	"syscalls.fsopen":               moreSyscallProbe("fsopen"),
	"syscalls.open-tree":            moreSyscallProbe("open_tree"),
	"syscalls.move-mount":           moreSyscallProbe("move_mount"),
	"syscalls.kcmp":                 moreSyscallProbe("kcmp"),
	"syscalls.pidfd-getfd":          moreSyscallProbe("pidfd_getfd"),
	"syscalls.open-by-handle-at":    moreSyscallProbe("open_by_handle_at"),
	"syscalls.vhangup":              sysVhangup,
	"workload.transform-compute":    workloadCompute,
	"workload.transform-subprocess": workloadSubprocess,
	"workload.transform-threads":    workloadThreads,
	"workload.transform-scratch":    workloadScratch,
	"fingerprint.runtime":           fingerprintRuntime,
	"resources.fork-bomb":           forkBomb,
	"resources.memory":              memoryBomb,
	"resources.disk-fill":           diskFill,
	"persistence.rootfs-write":      rootfsWrite,
	"persistence.marker-next-run":   markerNextRun,
	"persistence.shell-startup":     shellStartup,
	"metadata.gcp":                  metadataGCP,
	"metadata.azure":                metadataAzure,
	"metadata.ip-encodings":         metadataIPEncodings,
	"metadata.redirect":             metadataRedirect,
	"egress.tcp-ports":              egressTCPPortsProbe,
	"egress.udp":                    egressUDPProbe,
	"egress.dns-exfil":              dnsExfil,
	"egress.dns-direct":             dnsDirect,
	"egress.package-mirror":         packageMirror,
	"egress.dns-alt-port":           dnsAltPort,
	"metadata.dns-rebinding":        metadataDNSRebinding,
	"metadata.ecs-task-role":        metadataECSTaskRole,
	"metadata.alibaba":              metadataAlibaba,
}

// register adds the implementations of one family file; each file of the
// later families calls it from init, so that files do not contend for the
// map above. A duplicate ID is a build defect.
func register(m map[string]Func) {
	for id, f := range m {
		if _, dup := registry[id]; dup {
			panic("probe " + id + " registered twice")
		}
		registry[id] = f
	}
}

// ErrUnknownProbe is returned by Run for an ID without an implementation.
var ErrUnknownProbe = errors.New("unknown probe")

// IDs returns the implemented probe IDs in catalog order.
func IDs() []string {
	var ids []string
	for _, s := range probes.Catalog() {
		if _, ok := registry[s.ID]; ok {
			ids = append(ids, s.ID)
		}
	}
	return ids
}

// Known reports whether id has both a catalog entry and an implementation.
func Known(id string) bool {
	_, impl := registry[id]
	_, spec := probes.Lookup(id)
	return impl && spec
}

// graceAfterDeadline is how long Run waits for a probe that overran its
// deadline before giving up on it; probes honour ctx, so this only matters for
// a probe stuck in a system call.
const graceAfterDeadline = 500 * time.Millisecond

// Run carries out one probe within its bound. The probe gets 80% of the spec's
// timeout (the spec's timeout bounds the whole run on the harness side, process
// start and output included). A probe that panics or overruns is reported as
// inconclusive; the returned error is only for an unknown ID.
func Run(ctx context.Context, id string, p probes.Params) (probes.Result, error) {
	f, ok := registry[id]
	spec, inCatalog := probes.Lookup(id)
	if !ok || !inCatalog {
		return probes.Result{}, fmt.Errorf("running probe %q: %w", id, ErrUnknownProbe)
	}
	budget := spec.Timeout.D() * 8 / 10
	ctx, cancel := context.WithTimeout(ctx, budget)
	defer cancel()

	done := make(chan probes.Result, 1)
	go func() {
		defer func() {
			if v := recover(); v != nil {
				done <- inconclusive(fmt.Sprintf("probe panicked: %v", v), nil)
			}
		}()
		done <- f(ctx, p)
	}()
	var r probes.Result
	select {
	case r = <-done:
	case <-ctx.Done():
		select {
		case r = <-done:
		case <-time.After(graceAfterDeadline):
			r = inconclusive(fmt.Sprintf("probe did not finish within %s", budget), nil)
		}
	}
	r.Probe = id
	return finish(r), nil
}
