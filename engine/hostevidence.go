package engine

import (
	"fmt"
	"slices"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/sandcheck/sandcheck/canary"
	"github.com/sandcheck/sandcheck/evidence"
	"github.com/sandcheck/sandcheck/probes"
	"github.com/sandcheck/sandcheck/runners"
	"github.com/sandcheck/sandcheck/targets"
)

// hostEvidence gathers what the host itself observed about one probe: the
// runtime's view of the sandbox, canary hits carrying the probe's token, a
// honeyfile token only the host could have planted. Each kind the spec
// names is asked of its observer (observers.go).
func (e *Engine) hostEvidence(spec probes.Spec, token string, s *sandbox, self selfReport) []evidence.Item {
	var items []evidence.Item
	o := observation{spec: spec, token: token, s: s, self: self}
	for _, h := range spec.Host {
		if obs, ok := observers[h]; ok && obs != nil {
			items = append(items, obs(e, h, o)...)
		}
	}
	// A syscall probe's "not applicable" is held to the kernel's own table.
	if it, ok := syscallTableFact(spec, self, builtInSyscalls()); ok {
		items = append(items, it)
	}
	// A sandbox the CPU watchdog killed stopped whatever probe it ran: the
	// host says so for every probe, not only the one that declares it.
	if !slices.Contains(spec.Host, "cpu-budget") {
		if killed, _, _, _ := s.cpu.end(); killed {
			items = append(items, e.cpuBudgetEvidence(s))
		}
	}
	return items
}

// dangerousCaps are the capabilities whose presence the runtime view alone
// proves dangerous (see privilege.dangerous-caps).
var dangerousCaps = []string{"SYS_ADMIN", "NET_ADMIN", "NET_RAW", "SYS_PTRACE", "SYS_MODULE",
	"DAC_READ_SEARCH", "SYS_RAWIO", "BPF", "PERFMON", "SYS_BOOT", "MKNOD", "SYS_TIME", "ALL"}

// capEscapes is, for each probe the runtime view's capabilities speak to
// (runtime:caps), the added capabilities whose documented power
// (capabilities(7)) makes that probe's escape; ALL and privileged make
// every one. Another added capability says nothing of the probe: SYS_MODULE
// loads kernel code, but a release_agent escape is a cgroup mount, which
// only SYS_ADMIN allows.
var capEscapes = map[string][]string{
	"privilege.dangerous-caps":    dangerousCaps,
	"host.mknod":                  {"MKNOD"},      // mknod(2) of device nodes
	"host.kallsyms":               {"SYSLOG"},     // kernel addresses under kptr_restrict=1
	"host.release-agent":          {"SYS_ADMIN"},  // mount(2) of a cgroup v1 hierarchy
	"privilege.mount-fs":          {"SYS_ADMIN"},  // mount(2)
	"privilege.ptrace-other":      {"SYS_PTRACE"}, // ptrace(2) of another user's process
	"attribution.hostname-change": {"SYS_ADMIN"},  // sethostname(2)
}

// escapeCaps are the capabilities of v.CapAdd that make probe's escape
// (capEscapes; a probe not listed takes dangerousCaps).
func escapeCaps(probe string, add []string) []string {
	set, ok := capEscapes[probe]
	if !ok {
		set = dangerousCaps
	}
	var out []string
	for _, c := range add {
		n := strings.TrimPrefix(strings.ToUpper(c), "CAP_")
		if n == "ALL" || slices.Contains(set, n) {
			out = append(out, c)
		}
	}
	return out
}

// factField is the runtime view's field (its JSON name, as
// RuntimeView.Unknown lists it) that a runtime fact reads.
var factField = map[string]string{
	"seccomp": "seccomp", "no-new-privileges": "no_new_privileges", "user": "user", "caps": "cap_add",
	"mounts": "mounts", "masked-paths": "masked_paths", "read-only-rootfs": "read_only_rootfs",
	"pids-limit": "pids_limit", "memory-limit": "memory_bytes", "oom": "oom_killed", "env": "env",
}

// runtimeFact turns one fact of the runtime's view into evidence. It says
// "escaped" or "blocked" only where the configuration alone settles the
// question; otherwise it informs without indicating.
func runtimeFact(fact string, spec probes.Spec, v *runners.RuntimeView) (evidence.Item, bool) {
	it := evidence.Item{Source: evidence.SourceRuntime, Kind: fact}
	// A field the runtime could not tell reads as its zero value: a
	// Kubernetes pod's masked paths or process limit are the node's, not
	// the API's. It indicates nothing (the probe's own word stands), rather
	// than "none", which would grade a hardened box escaped.
	if f, ok := factField[fact]; ok && slices.Contains(v.Unknown, f) {
		it.Summary = "the runtime could not tell its " + f
		return it, true
	}
	switch fact {
	case "seccomp":
		it.Summary = "seccomp profile: " + v.Seccomp
		if spec.ID == "privilege.seccomp" {
			it.Indicates = map[bool]probes.Outcome{true: probes.Escaped, false: probes.Blocked}[v.Seccomp == "unconfined"]
		}
	case "no-new-privileges":
		it.Summary = fmt.Sprintf("no-new-privileges: %t", v.NoNewPrivileges)
		it.Indicates = map[bool]probes.Outcome{true: probes.Blocked, false: probes.Escaped}[v.NoNewPrivileges]
	case "user":
		it.Summary = fmt.Sprintf("user: %q", v.User)
		switch u := strings.SplitN(v.User, ":", 2)[0]; u {
		case "0", "root":
			it.Indicates = probes.Escaped
		case "":
			it.Summary += " (the image's default)"
		default:
			it.Indicates = probes.Blocked
		}
	case "caps":
		it.Summary = fmt.Sprintf("cap_add %v, cap_drop %v", v.CapAdd, v.CapDrop)
		bad := escapeCaps(spec.ID, v.CapAdd)
		dropAll := slices.ContainsFunc(v.CapDrop, func(c string) bool { return strings.EqualFold(c, "ALL") })
		switch {
		case v.Privileged:
			it.Indicates = probes.Escaped
		case len(bad) > 0:
			it.Summary += fmt.Sprintf("; %s allow(s) what %s tries", strings.Join(bad, ", "), spec.ID)
			it.Indicates = probes.Escaped
		case dropAll:
			// Every capability dropped but those added, none of which
			// allows what this probe tries.
			if len(v.CapAdd) > 0 {
				it.Summary += fmt.Sprintf("; none of them allows what %s tries", spec.ID)
			}
			it.Indicates = probes.Blocked
		case spec.ID == "privilege.dangerous-caps":
			// The engine's default set keeps NET_RAW and MKNOD.
			it.Summary += "; the runtime's default set keeps NET_RAW and MKNOD"
			it.Indicates = probes.Escaped
		}
	case "mounts":
		var binds []string
		for _, m := range v.Mounts {
			if m.Type == "bind" && m.Destination != runners.ProbeMount {
				binds = append(binds, fmt.Sprintf("%s->%s(ro=%t)", m.Source, m.Destination, m.ReadOnly))
			}
		}
		it.Summary = fmt.Sprintf("host bind mounts: %v", binds)
		switch spec.ID {
		case "host.engine-socket":
			if slices.ContainsFunc(binds, func(b string) bool { return strings.Contains(b, ".sock") }) {
				it.Indicates = probes.Escaped
			}
		default:
			if len(binds) > 0 {
				it.Indicates = probes.Escaped
			} else {
				it.Indicates = probes.Blocked
			}
		}
	case "masked-paths":
		it.Summary = fmt.Sprintf("%d masked /proc paths", len(v.MaskedPaths))
		if len(v.MaskedPaths) == 0 {
			it.Indicates = probes.Escaped
		}
	case "read-only-rootfs":
		it.Summary = fmt.Sprintf("read-only root filesystem: %t", v.ReadOnlyRootfs)
		if v.ReadOnlyRootfs {
			it.Indicates = probes.Blocked
		}
	case "pids-limit":
		it.Summary = fmt.Sprintf("pids limit: %d", v.PidsLimit)
		if v.PidsLimit <= 0 {
			it.Indicates = probes.Escaped
		}
	case "memory-limit":
		it.Summary = fmt.Sprintf("memory limit: %d bytes", v.MemoryBytes)
		if v.MemoryBytes <= 0 {
			it.Indicates = probes.Escaped
		}
	case "oom":
		it.Kind = "oom-killed"
		if !v.OOMKilled {
			return it, false
		}
		it.Summary = fmt.Sprintf("the kernel OOM-killed the sandbox at its memory limit (%d bytes); exit code %d", v.MemoryBytes, v.ExitCode)
		it.Indicates = probes.Blocked
	case "env":
		it.Summary = fmt.Sprintf("environment names: %v", v.Env)
	default:
		return it, false
	}
	return it, true
}

// canaryServices maps the canary named in a spec's host list
// (canary:<name>) to the hit services it covers.
var canaryServices = map[string][]string{
	"metadata": {canary.ServiceAWS, canary.ServiceGCP, canary.ServiceAzure, canary.ServiceECS, canary.ServiceAlibaba},
	"dns":      {canary.ServiceDNS},
	"sink":     {canary.ServiceTCP, canary.ServiceUDP, canary.ServiceHTTP, canary.ServiceICMP},
	"proxy":    {canary.ServiceProxy},
	"broker":   {canary.ServiceBroker},
	"kube-api": {canary.ServiceKubeAPI},
}

// canaryHits joins the hits of one canary carrying the probe's token. Hits
// on an egress canary name their destination (the role of the harness
// address they arrived on), which the policy checks against the profile.
func (e *Engine) canaryHits(name string, spec probes.Spec, token string, self selfReport) []evidence.Item {
	services, known := canaryServices[name]
	if !known {
		return []evidence.Item{{Source: evidence.SourceCanary, Kind: name + "-canary",
			Summary: fmt.Sprintf("the catalog names canary %q, which the harness does not run", name)}}
	}
	if e.net == nil {
		return []evidence.Item{{Source: evidence.SourceCanary, Kind: name + "-canary",
			Summary: "no harness network: the sandbox was given no route to a canary"}}
	}
	var hits []canary.Hit
	for _, h := range e.net.Recorder().ByToken(token) {
		// A batch shares one token; the probe ID tells its hits apart.
		if h.Probe == spec.ID && slices.Contains(services, h.Service) {
			hits = append(hits, h)
		}
	}
	if len(hits) == 0 {
		it := evidence.Item{Source: evidence.SourceCanary, Kind: name + "-canary",
			Summary: fmt.Sprintf("nothing with the probe's token reached the %s canary", name)}
		if self.Outcome == probes.Escaped {
			it.Summary += "; the probe's escape is unconfirmed"
			it.Kind = name + "-unconfirmed"
		}
		return []evidence.Item{it}
	}
	seen := make([]string, 0, len(hits))
	for _, h := range hits {
		what := h.Method + " " + h.Path
		if name != "metadata" {
			what = strings.TrimSpace(h.Transport + " " + h.Local + " " + what)
		}
		if h.Via != "" {
			what += " (" + h.Via + ")"
		}
		seen = append(seen, what)
	}
	data := map[string]string{"token": token, "remote": hits[0].Remote}
	if name != "metadata" {
		data["destination"] = e.net.Role(hits[0].Local)
		data["local"] = hits[0].Local
	}
	// The paths the hits came by (canary.Hit.Via; "direct" for none), so
	// that each path a probe says escaped is held to a hit of its own.
	var vias []string
	for _, h := range hits {
		v := h.Via
		if v == "" {
			v = "direct"
		}
		if !slices.Contains(vias, v) {
			vias = append(vias, v)
		}
	}
	slices.Sort(vias)
	data["via"] = strings.Join(vias, ",")
	summary := fmt.Sprintf("%d contact(s) with the probe's token reached the %s canary: %s", len(hits), name, truncate(strings.Join(seen, ", "), 300))
	// Each proxy path the probe says reached its destination is held to
	// a hit of its own: one the canary did not see by that path is named
	// (the escape stands on the paths the canary saw).
	var unseen []string
	for _, v := range reachedVias(self.Fields["paths"]) {
		if !slices.Contains(vias, v) && !slices.Contains(unseen, v) {
			unseen = append(unseen, v)
		}
	}
	if len(unseen) > 0 {
		data["via_unconfirmed"] = strings.Join(unseen, ",")
		summary += "; the probe says it also reached it " + strings.Join(unseen, ", ") + ", which the canary did not see"
	}
	for _, h := range hits {
		// What the canary saw a request authenticate with (the planted
		// credential wins), never the secret itself.
		if h.Credential != "" && data["credential"] != canary.CredentialPlanted {
			data["credential"] = h.Credential
		}
	}
	return []evidence.Item{{Source: evidence.SourceCanary, Kind: name + "-hit", Indicates: probes.Escaped,
		Summary: summary, Data: data}}
}

// reachedVias reads the paths a probe's "paths" evidence says reached
// their destination ("via-socks5 127.0.0.1:1080 (FTP_PROXY): reached",
// probes/impl/egress_proxypath.go). The field is the box's word: only
// the via-* words are taken, and only to name what the canary did not
// see, never to make an escape.
func reachedVias(paths string) []string {
	var out []string
	for _, seg := range strings.Split(paths, "; ") {
		via, _, _ := strings.Cut(seg, " ")
		if strings.HasSuffix(seg, ": reached") && strings.HasPrefix(via, "via-") && len(via) <= 32 && !slices.Contains(out, via) {
			out = append(out, via)
		}
	}
	return out
}

// targetFact turns the PID namespace and devices the harness itself started
// the sandbox with (the target's docker section, not the box's word) into
// evidence. Under runc it settles the probe: the host's PID namespace or a
// host device passed in is reach whatever the probe says. gVisor keeps its
// own process table and devices, so there it only informs.
func (e *Engine) targetFact(fact string, spec probes.Spec) (evidence.Item, bool) {
	d := e.target.Docker
	if d == nil {
		return evidence.Item{}, false
	}
	it := evidence.Item{Source: evidence.SourceRuntime, Kind: fact}
	settles := d.Runtime == "runc"
	switch fact {
	case "pid":
		if d.PID != "host" {
			it.Summary = "the sandbox was started in its own PID namespace (target configuration)"
			return it, true
		}
		it.Summary = "the sandbox was started in the host's PID namespace (target configuration: pid host)"
		if settles {
			it.Indicates = probes.Escaped
		}
	case "devices":
		var passed []string
		for _, dv := range d.Devices {
			src := dv.Source
			if src == targets.BlockCanarySource && e.block != nil {
				src = e.block.path
			}
			if hostDeviceMatches(spec.ID, src, dv.Target) {
				passed = append(passed, src+"->"+dv.Target)
			}
		}
		if len(passed) == 0 {
			it.Summary = "no host device of this kind was passed into the sandbox (target configuration)"
			return it, true
		}
		it.Summary = fmt.Sprintf("host device(s) passed into the sandbox (target configuration): %s", strings.Join(passed, ", "))
		if settles {
			it.Indicates = probes.Escaped
		}
	default:
		return it, false
	}
	return it, true
}

// hostDeviceMatches reports whether a device passed into the sandbox is the
// kind a probe looks for: the kernel log for host.dev-kmsg, a host block
// device for host.block-devices.
func hostDeviceMatches(probe, source, target string) bool {
	switch probe {
	case "host.dev-kmsg":
		return source == "/dev/kmsg" || target == "/dev/kmsg"
	case "host.block-devices":
		var st unix.Stat_t
		return unix.Stat(source, &st) == nil && st.Mode&unix.S_IFMT == unix.S_IFBLK
	}
	return false
}
