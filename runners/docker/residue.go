package docker

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"

	"github.com/sandcheck/sandcheck/internal/bounded"
	"github.com/sandcheck/sandcheck/probes"
	"github.com/sandcheck/sandcheck/runners"
)

var _ runners.ResidueFinder = (*Sandbox)(nil)

// residueToken is the shape of a token FindResidue accepts: it ends up in
// engine filters and is matched against host files, so nothing loose.
var residueToken = regexp.MustCompile(`^[a-z0-9]{8,64}$`)

// residueTimeout bounds one FindResidue, cleanup included.
const residueTimeout = 45 * time.Second

// writableHostDirs lists the host folders bound or volume-mounted writable
// into a container (the probe binary's folder is read-only, a socket is not
// a folder).
func writableHostDirs(points []container.MountPoint) []string {
	var out []string
	for _, m := range points {
		if !m.RW || (m.Type != "bind" && m.Type != "volume") || m.Source == "" {
			continue
		}
		if fi, err := os.Lstat(m.Source); err == nil && fi.IsDir() {
			out = append(out, m.Source)
		}
	}
	return out
}

// tokenContainer is a container carrying the token, as the engine
// described it before it was removed.
type tokenContainer struct {
	id, name, state, mergedDir, sandboxKey string
}

// FindResidue looks on the host, after Close, for what carries token: other
// containers (by the sandcheck.teardown label or their name), host
// processes (token in their command line or environment), their cgroups,
// mounts (naming the token or such a container, volumes labelled with it),
// networks, links, veths and network namespaces, and token files in the
// writable host folders the sandbox had. Then it removes all of it, noting
// anything it could not remove, so the host is as it was.
func (s *Sandbox) FindResidue(ctx context.Context, token string, kinds []string) ([]runners.Residue, error) {
	s.closeMu.Lock()
	ran := s.closeRan
	s.closeMu.Unlock()
	if !ran {
		return nil, fmt.Errorf("looking for residue of %s: %w", s.id, errNotClosed)
	}
	if !residueToken.MatchString(token) {
		return nil, fmt.Errorf("looking for residue of %s: token %q is not lower-case letters and digits", s.id, token)
	}
	for _, k := range kinds {
		if !slices.Contains(runners.ResidueKinds, k) {
			return nil, fmt.Errorf("looking for residue of %s: unknown kind %q (known: %v)", s.id, k, runners.ResidueKinds)
		}
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), residueTimeout)
	defer cancel()
	found := map[string]*runners.Residue{}
	for _, k := range runners.ResidueKinds {
		found[k] = &runners.Residue{Kind: k}
	}
	fail := func(kind string, err error) {
		if found[kind].Failed == "" {
			found[kind].Failed = err.Error()
		}
	}

	ctrs, err := s.tokenContainers(ctx, token)
	if err != nil {
		for _, k := range []string{"container", "cgroups", "mounts", "network"} {
			fail(k, err)
		}
	}
	found["container"].Checked = "the engine's containers labelled " + probes.LabelTeardownToken + "=" + token + " or named with it"
	for _, c := range ctrs {
		found["container"].Found = append(found["container"].Found, fmt.Sprintf("container %s (%s, %s)", c.name, shortID(c.id), c.state))
	}

	found["processes"].Checked = "every host process's command line and environment"
	if procs, err := processesWithToken(token); err != nil {
		fail("processes", err)
	} else {
		found["processes"].Found = procs
	}

	found["cgroups"].Checked = "the cgroup folders of the containers carrying the token"
	for _, c := range ctrs {
		found["cgroups"].Found = append(found["cgroups"].Found, cgroupsOf(c.id)...)
	}

	found["mounts"].Checked = "the host's mounts and the engine's volumes"
	needles := []string{token}
	for _, c := range ctrs {
		needles = append(needles, c.id)
		if c.mergedDir != "" {
			needles = append(needles, c.mergedDir)
		}
	}
	if mnts, err := mountsNaming(needles); err != nil {
		fail("mounts", err)
	} else {
		found["mounts"].Found = append(found["mounts"].Found, mnts...)
	}
	vols, err := s.tokenVolumes(ctx, token)
	if err != nil {
		fail("mounts", err)
	}
	for _, v := range vols {
		found["mounts"].Found = append(found["mounts"].Found, "volume "+v+" still exists")
	}

	found["network"].Checked = "the engine's networks, the host's links and the containers' network namespaces"
	nets, err := s.tokenNetworks(ctx, token)
	if err != nil {
		fail("network", err)
	}
	for _, n := range nets {
		found["network"].Found = append(found["network"].Found, "network "+n+" still exists")
	}
	found["network"].Found = append(found["network"].Found, linksNaming(token)...)
	for _, c := range ctrs {
		if c.sandboxKey != "" {
			if _, err := os.Lstat(c.sandboxKey); err == nil {
				found["network"].Found = append(found["network"].Found, "network namespace "+c.sandboxKey+" still exists")
			}
		}
	}

	found["scratch"].Checked = fmt.Sprintf("the sandbox's %d writable host folder(s)", len(s.hostDirs))
	var files []string
	for _, d := range s.hostDirs {
		p := filepath.Join(d, probes.TeardownPrefix+token)
		// Lstat: a link the sandbox left there is reported and removed
		// itself, never followed.
		if _, err := os.Lstat(p); err == nil {
			files = append(files, p)
			found["scratch"].Found = append(found["scratch"].Found, "file "+p+" still exists")
		}
	}

	// Leave the host as it was: everything found goes, and what cannot go
	// is said where it was found.
	for _, c := range ctrs {
		if err := remove(ctx, s.cli, c.id); err != nil {
			found["container"].Found = append(found["container"].Found, "and could not remove it: "+err.Error())
		}
	}
	for _, n := range nets {
		if _, err := s.cli.NetworkRemove(ctx, n, client.NetworkRemoveOptions{}); err != nil && !cerrdefs.IsNotFound(err) {
			found["network"].Found = append(found["network"].Found, fmt.Sprintf("and could not remove network %s: %v", n, err))
		}
	}
	for _, v := range vols {
		if _, err := s.cli.VolumeRemove(ctx, v, client.VolumeRemoveOptions{Force: true}); err != nil && !cerrdefs.IsNotFound(err) {
			found["mounts"].Found = append(found["mounts"].Found, fmt.Sprintf("and could not remove volume %s: %v", v, err))
		}
	}
	for _, f := range files {
		if err := os.Remove(f); err != nil && !errors.Is(err, os.ErrNotExist) {
			found["scratch"].Found = append(found["scratch"].Found, "and could not remove it: "+err.Error())
		}
	}
	if left := killWithToken(token); len(left) > 0 {
		found["processes"].Found = append(found["processes"].Found, left...)
	}

	out := make([]runners.Residue, 0, len(kinds))
	for _, k := range kinds {
		out = append(out, *found[k])
	}
	return out, nil
}

// tokenContainers lists the containers labelled with the token or named
// with it, and describes each.
func (s *Sandbox) tokenContainers(ctx context.Context, token string) ([]tokenContainer, error) {
	seen := map[string]bool{}
	var out []tokenContainer
	for _, f := range []client.Filters{
		make(client.Filters).Add("label", probes.LabelTeardownToken+"="+token),
		make(client.Filters).Add("name", token),
	} {
		res, err := s.cli.ContainerList(ctx, client.ContainerListOptions{All: true, Filters: f})
		if err != nil {
			return out, fmt.Errorf("listing containers carrying the token: %w", err)
		}
		for _, c := range res.Items {
			if seen[c.ID] || c.ID == s.id {
				continue
			}
			seen[c.ID] = true
			tc := tokenContainer{id: c.ID, state: string(c.State)}
			if len(c.Names) > 0 {
				tc.name = strings.TrimPrefix(c.Names[0], "/")
			}
			if in, err := s.cli.ContainerInspect(ctx, c.ID, client.ContainerInspectOptions{}); err == nil {
				if in.Container.GraphDriver != nil {
					tc.mergedDir = in.Container.GraphDriver.Data["MergedDir"]
				}
				if in.Container.NetworkSettings != nil {
					tc.sandboxKey = in.Container.NetworkSettings.SandboxKey
				}
			}
			out = append(out, tc)
		}
	}
	return out, nil
}

func (s *Sandbox) tokenVolumes(ctx context.Context, token string) ([]string, error) {
	res, err := s.cli.VolumeList(ctx, client.VolumeListOptions{Filters: make(client.Filters).Add("label", probes.LabelTeardownToken+"="+token)})
	if err != nil {
		return nil, fmt.Errorf("listing volumes carrying the token: %w", err)
	}
	var out []string
	for _, v := range res.Items {
		out = append(out, v.Name)
	}
	all, err := s.cli.VolumeList(ctx, client.VolumeListOptions{Filters: make(client.Filters).Add("name", token)})
	if err == nil {
		for _, v := range all.Items {
			if !slices.Contains(out, v.Name) {
				out = append(out, v.Name)
			}
		}
	}
	return out, nil
}

func (s *Sandbox) tokenNetworks(ctx context.Context, token string) ([]string, error) {
	var out []string
	for _, f := range []client.Filters{
		make(client.Filters).Add("label", probes.LabelTeardownToken+"="+token),
		make(client.Filters).Add("name", token),
	} {
		res, err := s.cli.NetworkList(ctx, client.NetworkListOptions{Filters: f})
		if err != nil {
			return out, fmt.Errorf("listing networks carrying the token: %w", err)
		}
		for _, n := range res.Items {
			if !slices.Contains(out, n.Name) {
				out = append(out, n.Name)
			}
		}
	}
	return out, nil
}

// processesWithToken lists host processes whose command line or
// environment holds the token.
func processesWithToken(token string) ([]string, error) {
	pids, err := procPIDs()
	if err != nil {
		return nil, err
	}
	var out []string
	for _, pid := range pids {
		dir := filepath.Join("/proc", strconv.Itoa(pid))
		cmd := bounded.ReadFile(filepath.Join(dir, "cmdline"), maxProcFile)
		env := bounded.ReadFile(filepath.Join(dir, "environ"), maxProcFile)
		if !bytes.Contains(cmd, []byte(token)) && !bytes.Contains(env, []byte(token)) {
			continue
		}
		what := printable(cmd, 160)
		if what == "" {
			what = printable(bounded.ReadFile(filepath.Join(dir, "comm"), 64), 64)
		}
		out = append(out, fmt.Sprintf("process %d (%s) carries the token", pid, what))
	}
	return out, nil
}

// procPIDs lists the host's processes other than this one.
func procPIDs() ([]int, error) {
	d, err := os.Open("/proc")
	if err != nil {
		return nil, fmt.Errorf("listing processes: %w", err)
	}
	defer d.Close()
	names, err := d.Readdirnames(maxProcs)
	if err != nil && len(names) == 0 {
		return nil, fmt.Errorf("listing processes: %w", err)
	}
	self := os.Getpid()
	var out []int
	for _, n := range names {
		if pid, err := strconv.Atoi(n); err == nil && pid != self {
			out = append(out, pid)
		}
	}
	return out, nil
}

// killWithToken kills what still carries the token once its containers are
// gone (a process that left its container's cgroup), and lists what would
// not die within a few seconds.
func killWithToken(token string) []string {
	deadline := time.Now().Add(5 * time.Second)
	for {
		pids, err := procPIDs()
		if err != nil {
			return []string{"could not list processes to kill: " + err.Error()}
		}
		var left []string
		for _, pid := range pids {
			dir := filepath.Join("/proc", strconv.Itoa(pid))
			if bytes.Contains(bounded.ReadFile(filepath.Join(dir, "cmdline"), maxProcFile), []byte(token)) ||
				bytes.Contains(bounded.ReadFile(filepath.Join(dir, "environ"), maxProcFile), []byte(token)) {
				_ = syscall.Kill(pid, syscall.SIGKILL)
				left = append(left, strconv.Itoa(pid))
			}
		}
		if len(left) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return []string{"and processes " + strings.Join(left, ", ") + " would not die"}
		}
		time.Sleep(teardownPoll)
	}
}

// mountsNaming lists the host mounts whose line names any of needles.
func mountsNaming(needles []string) ([]string, error) {
	var out []string
	for _, n := range needles {
		m, err := mountsOf(n, "")
		if err != nil {
			return nil, err
		}
		for _, x := range m {
			if !slices.Contains(out, x) {
				out = append(out, x)
			}
		}
	}
	return out, nil
}

// linksNaming lists host network links whose name holds the token's tail
// (a link name has at most 15 characters), and the veths enslaved to them.
func linksNaming(token string) []string {
	tail := token
	if len(tail) > 10 {
		tail = tail[len(tail)-10:]
	}
	ents, err := os.ReadDir("/sys/class/net")
	if err != nil {
		return []string{"could not list links: " + err.Error()}
	}
	var out []string
	for _, e := range ents {
		if !strings.Contains(e.Name(), tail) {
			continue
		}
		out = append(out, "link "+e.Name()+" still exists")
		ports, _ := os.ReadDir(filepath.Join("/sys/class/net", e.Name(), "brif"))
		for _, p := range ports {
			out = append(out, "link "+p.Name()+" (on "+e.Name()+") still exists")
		}
	}
	return out
}

func shortID(id string) string {
	if len(id) > 12 {
		return id[:12]
	}
	return id
}
