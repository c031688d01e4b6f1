package docker

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/api/types/mount"
	"github.com/moby/moby/client"

	"github.com/sandcheck/sandcheck/probes"
	"github.com/sandcheck/sandcheck/targets"
)

// Imported is a target written from a container the platform started, with
// what sandcheck cannot reproduce named, never silently left out.
type Imported struct {
	// Target is the container's settings as a target (Path and Digest unset).
	Target targets.Target
	// Seccomp is the container's custom seccomp profile (JSON), if any: the
	// caller writes it to a file and points Target.Docker.Seccomp at it.
	Seccomp string
	// Notes name each setting the target cannot carry or sandcheck cannot
	// reproduce, with its value.
	Notes []string
}

// ImportOptions are what a container cannot say about the platform that
// made it, given by the user (sandcheck targets import's flags). Each left
// empty is assumed, and the assumption is a note.
type ImportOptions struct {
	// Profile is the design guide's profile the platform runs the sandbox
	// under (probes.Profiles); empty assumes high-risk-code, the strictest.
	Profile string
	// Launch is how the platform hands it work: "exec" (one long-lived
	// sandbox, each task exec'd into it) or "task" (each task the first
	// process of a fresh sandbox); empty assumes exec.
	Launch string
	// IdentityLabels are the platform's identity labels as templates
	// (KEY=VALUE with ${SANDCHECK_RUN_ID}, ${SANDCHECK_TARGET},
	// ${SANDCHECK_TASK}): labels that name the run and task on each
	// sandbox, where the container shows only one sandbox's values. They
	// replace a copied label of the same key.
	IdentityLabels map[string]string
}

// check refuses options that name nothing the target can hold.
func (o ImportOptions) check() error {
	if o.Profile != "" && !slices.Contains(probes.Profiles, o.Profile) {
		return fmt.Errorf("profile %q is not one of %v", o.Profile, probes.Profiles)
	}
	if o.Launch != "" && o.Launch != "exec" && o.Launch != "task" {
		return fmt.Errorf("launch %q is not exec or task", o.Launch)
	}
	for k := range o.IdentityLabels {
		if k == "" || k == "sandcheck" || strings.HasPrefix(k, "sandcheck.") {
			return fmt.Errorf("identity label %q: the sandcheck. prefix is the harness's own", k)
		}
	}
	return nil
}

// Import reads a container with docker inspect and writes its settings as a
// target.
func Import(ctx context.Context, id string, opts ImportOptions) (*Imported, error) {
	if err := opts.check(); err != nil {
		return nil, fmt.Errorf("importing container %s: %w", id, err)
	}
	c, err := engine(ctx)
	if err != nil {
		return nil, err
	}
	res, err := c.ContainerInspect(ctx, id, client.ContainerInspectOptions{})
	if err != nil {
		return nil, fmt.Errorf("inspecting container %s: %w", id, err)
	}
	return FromInspect(res.Container, opts)
}

var nameChars = regexp.MustCompile(`[^a-z0-9._-]+`)

// FromInspect turns an inspect response into a target, with what the
// options say of the platform.
func FromInspect(in container.InspectResponse, opts ImportOptions) (*Imported, error) {
	if err := opts.check(); err != nil {
		return nil, fmt.Errorf("importing container %s: %w", in.ID, err)
	}
	if in.Config == nil || in.HostConfig == nil {
		return nil, fmt.Errorf("container %s: inspect gave no Config or HostConfig", in.ID)
	}
	im := &Imported{}
	note := func(format string, args ...any) { im.Notes = append(im.Notes, fmt.Sprintf(format, args...)) }
	cfg, hc := in.Config, in.HostConfig
	name := strings.Trim(nameChars.ReplaceAllString(strings.ToLower(strings.TrimPrefix(in.Name, "/")), "-"), "-._")
	if name == "" {
		name = "imported"
	}
	if len(name) > 63 {
		name = name[:63]
	}
	im.Target = targets.Target{
		Schema: targets.Schema, Name: name, Runner: "docker", Image: cfg.Image,
		Profile:     opts.Profile,
		Description: fmt.Sprintf("imported from container %.12s (%s)", in.ID, strings.TrimPrefix(in.Name, "/")),
	}
	if opts.Profile == "" {
		im.Target.Profile = "high-risk-code"
		note("profile: assumed high-risk-code (the strictest); name the profile the platform runs this sandbox under (--profile)")
	}
	d := &targets.Docker{Runtime: hc.Runtime, User: cfg.User, Network: string(hc.NetworkMode), Launch: opts.Launch}
	if opts.Launch == "" {
		d.Launch = "exec"
		note("launch: assumed exec (one long-lived sandbox, each task exec'd into it); say --launch task if the platform starts a fresh sandbox per task")
	}
	im.Target.Docker = d
	if d.Runtime == "" {
		d.Runtime = "runc"
	}
	if d.Runtime != "runc" && d.Runtime != "runsc" {
		note("runtime %q: sandcheck runs only runc and runsc; the target keeps %q and will not validate", hc.Runtime, hc.Runtime)
	}
	switch d.Network {
	case "", "default":
		d.Network = "bridge"
	}
	if strings.HasPrefix(d.Network, "container:") {
		note("network %q: joins another container's network namespace, which sandcheck cannot reproduce; the target keeps it and will not validate", d.Network)
	}
	importEnv(d, cfg.Env, note)
	importLabels(d, cfg.Labels, note)
	if len(opts.IdentityLabels) == 0 {
		note("identity labels: none given; the labels are this one container's values, which name no run or task (--identity-label KEY=${SANDCHECK_TASK} gives the platform's)")
	}
	for k, v := range opts.IdentityLabels {
		if d.Labels == nil {
			d.Labels = map[string]string{}
		}
		d.Labels[k] = v
	}
	if cfg.Hostname != "" && !strings.HasPrefix(in.ID, cfg.Hostname) {
		d.Hostname = cfg.Hostname
	}
	if err := importSecurity(im, hc, note); err != nil {
		return nil, err
	}
	importResources(d, hc, note)
	d.PID = string(hc.PidMode)
	if d.PID != "" && d.PID != "host" {
		note("pid %q: sandcheck reproduces only the sandbox's own or the host's PID namespace; the target keeps it and will not validate", d.PID)
	}
	d.DockerHost = targets.DockerHost{
		Privileged: hc.Privileged, IPC: string(hc.IpcMode), UTS: string(hc.UTSMode),
		Cgroupns: string(hc.CgroupnsMode), Userns: string(hc.UsernsMode),
		Sysctls: maps.Clone(hc.Sysctls), GroupAdd: slices.Clone(hc.GroupAdd), ExtraHosts: slices.Clone(hc.ExtraHosts),
		OOMScoreAdj: hc.OomScoreAdj, CPUShares: hc.CPUShares, CpusetCPUs: hc.CpusetCpus,
	}
	if hc.OomKillDisable != nil {
		d.OOMKillDisable = *hc.OomKillDisable
	}
	if hc.Init != nil {
		d.Init = *hc.Init
	}
	importMounts(d, in, note)
	for _, dv := range hc.Devices {
		d.Devices = append(d.Devices, targets.Device{Source: dv.PathOnHost, Target: dv.PathInContainer, Permissions: dv.CgroupPermissions})
	}
	unmapped(cfg, hc, note)
	slices.Sort(im.Notes)
	return im, nil
}

func importEnv(d *targets.Docker, env []string, note func(string, ...any)) {
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(k, "SANDCHECK_") {
			note("env %s: the SANDCHECK_ prefix is reserved for the harness; left out", k)
			continue
		}
		if d.Env == nil {
			d.Env = map[string]string{}
		}
		d.Env[k] = v
	}
}

func importLabels(d *targets.Docker, labels map[string]string, note func(string, ...any)) {
	for k, v := range labels {
		if k == "sandcheck" || strings.HasPrefix(k, "sandcheck.") {
			note("label %s=%s: the sandcheck. prefix is the harness's own; left out (the harness adds its labels)", k, v)
			continue
		}
		if d.Labels == nil {
			d.Labels = map[string]string{}
		}
		// "${" would read as a harness variable.
		d.Labels[k] = strings.ReplaceAll(v, "${", "$ {")
	}
}

// importSecurity maps SecurityOpt and the masked paths.
func importSecurity(im *Imported, hc *container.HostConfig, note func(string, ...any)) error {
	d := im.Target.Docker
	// The engine reports capabilities with the CAP_ prefix targets leave out.
	for _, c := range hc.CapAdd {
		d.CapAdd = append(d.CapAdd, strings.TrimPrefix(strings.ToUpper(c), "CAP_"))
	}
	for _, c := range hc.CapDrop {
		d.CapDrop = append(d.CapDrop, strings.TrimPrefix(strings.ToUpper(c), "CAP_"))
	}
	for _, o := range hc.SecurityOpt {
		k, v, ok := strings.Cut(o, "=")
		if !ok {
			k, v, _ = strings.Cut(o, ":")
		}
		switch {
		case k == "no-new-privileges" && (v == "" || v == "true"):
			d.NoNewPrivileges = true
		case k == "seccomp" && v == "unconfined":
			d.Seccomp = "unconfined"
		case k == "seccomp" && json.Valid([]byte(v)):
			im.Seccomp = v
			d.Seccomp = "seccomp.json"
		case k == "apparmor" && v == "unconfined":
			d.AppArmor = "unconfined"
		default:
			note("security_opt %q: sandcheck cannot reproduce it", o)
		}
	}
	if hc.MaskedPaths != nil && len(hc.MaskedPaths) == 0 && !hc.Privileged {
		d.SystemPaths = "unconfined"
	}
	d.ReadOnlyRootfs = hc.ReadonlyRootfs
	return nil
}

func importResources(d *targets.Docker, hc *container.HostConfig, note func(string, ...any)) {
	r := hc.Resources
	if r.Memory > 0 {
		d.Memory = strconv.FormatInt(r.Memory, 10)
	}
	if r.MemorySwap != 0 && r.MemorySwap != r.Memory {
		note("memory swap %d: sandcheck sets swap equal to memory", r.MemorySwap)
	}
	switch {
	case r.NanoCPUs > 0:
		d.CPUs = float64(r.NanoCPUs) / 1e9
	case r.CPUQuota > 0 && r.CPUPeriod > 0:
		d.CPUs = float64(r.CPUQuota) / float64(r.CPUPeriod)
		note("cpu quota %d per period %d: written as cpus %.3g", r.CPUQuota, r.CPUPeriod, d.CPUs)
	}
	if r.PidsLimit != nil && *r.PidsLimit > 0 {
		d.PidsLimit = *r.PidsLimit
	}
	for _, u := range r.Ulimits {
		d.Ulimits = append(d.Ulimits, targets.Ulimit{Name: u.Name, Soft: u.Soft, Hard: u.Hard})
	}
	if hc.ShmSize > 0 && hc.ShmSize != 64<<20 {
		d.ShmSize = strconv.FormatInt(hc.ShmSize, 10)
	}
	for _, p := range slices.Sorted(maps.Keys(hc.Tmpfs)) {
		d.Tmpfs = append(d.Tmpfs, tmpfsFrom(p, hc.Tmpfs[p], note))
	}
}

// tmpfsFrom reads Docker's tmpfs options ("rw,noexec,size=64m").
func tmpfsFrom(path, opts string, note func(string, ...any)) targets.Tmpfs {
	// Docker mounts every tmpfs noexec, nosuid and nodev unless its
	// options say otherwise (the daemon's defaults, before the options).
	t := targets.Tmpfs{Path: path}
	for _, o := range strings.Split(opts, ",") {
		k, v, _ := strings.Cut(o, "=")
		switch k {
		case "", "rw", "nosuid", "nodev":
		case "noexec":
			t.Exec = false
		case "exec":
			t.Exec = true
		case "size":
			t.Size = strings.TrimSuffix(strings.TrimSuffix(v, "b"), "B")
		case "nr_inodes":
			t.NrInodes, _ = strconv.ParseInt(v, 10, 64)
		default:
			note("tmpfs %s option %q: sandcheck cannot reproduce it", path, o)
		}
	}
	if t.Size == "" {
		note("tmpfs %s has no size: capped only by the kernel's default (half the host's memory); imported as is, for the probes to grade", path)
	}
	return t
}

// tmpfsMount reads a tmpfs made through the mount API (--mount
// type=tmpfs): its size and options as the daemon applies them, after its
// defaults noexec, nosuid and nodev.
func tmpfsMount(dest string, mounts []mount.Mount, note func(string, ...any)) targets.Tmpfs {
	var opts []string
	for _, m := range mounts {
		if m.Type != mount.TypeTmpfs || m.Target != dest || m.TmpfsOptions == nil {
			continue
		}
		if m.TmpfsOptions.SizeBytes > 0 {
			opts = append(opts, "size="+strconv.FormatInt(m.TmpfsOptions.SizeBytes, 10))
		}
		if m.TmpfsOptions.Mode != 0 {
			note("tmpfs %s mode %o: sandcheck mounts its tmpfs with the kernel's default mode", dest, m.TmpfsOptions.Mode)
		}
		for _, o := range m.TmpfsOptions.Options {
			opts = append(opts, strings.Join(o, "="))
		}
	}
	return tmpfsFrom(dest, strings.Join(opts, ","), note)
}

// importMounts maps the container's mounts as the engine made them.
func importMounts(d *targets.Docker, in container.InspectResponse, note func(string, ...any)) {
	for _, m := range in.Mounts {
		switch m.Type {
		case "bind":
			d.Mounts = append(d.Mounts, targets.Mount{Source: m.Source, Target: m.Destination, ReadOnly: !m.RW})
		case "volume":
			if m.Name == "" {
				note("volume at %s has no name: sandcheck cannot reproduce it", m.Destination)
				continue
			}
			d.Volumes = append(d.Volumes, targets.Volume{Name: m.Name, Target: m.Destination, ReadOnly: !m.RW})
		case "tmpfs":
			if _, ok := in.HostConfig.Tmpfs[m.Destination]; !ok {
				d.Tmpfs = append(d.Tmpfs, tmpfsMount(m.Destination, in.HostConfig.Mounts, note))
			}
		default:
			note("%s mount at %s (source %s): sandcheck cannot reproduce it", m.Type, m.Destination, m.Source)
		}
	}
}

// mappedHost are the HostConfig fields the importer maps (or deliberately
// treats as the harness's, like LogConfig); any other field with a value is
// named in a note.
var mappedHost = []string{"Runtime", "NetworkMode", "CapAdd", "CapDrop", "SecurityOpt", "MaskedPaths", "ReadonlyPaths",
	"ReadonlyRootfs", "Memory", "MemorySwap", "NanoCpus", "CpuQuota", "CpuPeriod", "PidsLimit", "Ulimits", "ShmSize", "Tmpfs",
	"Binds", "Mounts", "PidMode", "Privileged", "IpcMode", "UTSMode", "CgroupnsMode", "UsernsMode", "Sysctls", "GroupAdd",
	"ExtraHosts", "OomScoreAdj", "CpuShares", "CpusetCpus", "OomKillDisable", "Init", "Devices", "LogConfig", "ConsoleSize"}

var mappedConfig = []string{"Image", "User", "Env", "Labels", "Hostname", "AttachStdin", "AttachStdout", "AttachStderr", "Tty", "OpenStdin", "StdinOnce"}

// unmapped notes every field of Config and HostConfig with a non-default
// value that the importer does not map.
func unmapped(cfg *container.Config, hc *container.HostConfig, note func(string, ...any)) {
	for what, v := range map[string]any{"Config": cfg, "HostConfig": hc} {
		b, err := json.Marshal(v)
		if err != nil {
			note("%s: cannot be read field by field: %v", what, err)
			continue
		}
		var m map[string]any
		_ = json.Unmarshal(b, &m)
		skip := mappedHost
		if what == "Config" {
			skip = mappedConfig
		}
		for _, k := range slices.Sorted(maps.Keys(m)) {
			if slices.Contains(skip, k) || isDefault(k, m[k]) {
				continue
			}
			val, _ := json.Marshal(m[k])
			switch {
			case what == "Config" && (k == "Cmd" || k == "Entrypoint"):
				note("Config.%s %s: not run; sandcheck's holder is the sandbox's first process and the probes are exec'd into it", k, val)
			default:
				note("%s.%s %s: sandcheck cannot reproduce it", what, k, val)
			}
		}
	}
}

// isDefault reports a value Docker fills in when nothing was asked for.
func isDefault(k string, v any) bool {
	switch k {
	case "RestartPolicy":
		if m, ok := v.(map[string]any); ok && (m["Name"] == "" || m["Name"] == "no") {
			return true
		}
	case "Isolation", "CgroupParent", "VolumeDriver":
		return v == ""
	}
	if v == nil {
		return true
	}
	rv := reflect.ValueOf(v)
	switch rv.Kind() {
	case reflect.Map, reflect.Slice:
		return rv.Len() == 0
	}
	return rv.IsZero()
}
