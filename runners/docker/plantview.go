package docker

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"time"

	"github.com/sandcheck/sandcheck/internal/bounded"
	"github.com/sandcheck/sandcheck/probes"
	"github.com/sandcheck/sandcheck/runners"
)

// The engine finds SeePlant by this method set (its plantViewer).
var _ interface {
	SeePlant(ctx context.Context, token string, kinds []string) (map[string][]string, error)
} = (*Sandbox)(nil)

// plantViewTimeout bounds one SeePlant.
const plantViewTimeout = 20 * time.Second

// SeePlant looks on the host, before Close, for what code in the sandbox
// made outside it carrying token: for "container", "cgroups" and
// "processes" other containers labelled with or named by the token (their
// processes and cgroups are outside the sandbox's); for "processes" also
// host processes carrying the token outside the sandbox's cgroup; for
// "mounts" the engine's volumes carrying it; for "network" its networks;
// for "scratch" token files in the sandbox's writable host folders. Only
// things outside the sandbox count: a process inside it dies with it
// whatever the box could have done elsewhere. It removes nothing
// (FindResidue after Close does), and it is an error after Close.
func (s *Sandbox) SeePlant(ctx context.Context, token string, kinds []string) (map[string][]string, error) {
	s.closeMu.Lock()
	ran := s.closeRan
	s.closeMu.Unlock()
	if ran {
		return nil, fmt.Errorf("looking for the plant of %s: the sandbox is already closed", s.id)
	}
	if !residueToken.MatchString(token) {
		return nil, fmt.Errorf("looking for the plant of %s: token %q is not lower-case letters and digits", s.id, token)
	}
	for _, k := range kinds {
		if !slices.Contains(runners.ResidueKinds, k) {
			return nil, fmt.Errorf("looking for the plant of %s: unknown kind %q (known: %v)", s.id, k, runners.ResidueKinds)
		}
	}
	ctx, cancel := context.WithTimeout(ctx, plantViewTimeout)
	defer cancel()
	seen := make(map[string][]string, len(kinds))
	want := func(k string) bool { return slices.Contains(kinds, k) }
	if want("container") || want("cgroups") || want("processes") {
		ctrs, err := s.tokenContainers(ctx, token)
		if err != nil {
			return nil, fmt.Errorf("looking for the plant of %s: %w", s.id, err)
		}
		for _, c := range ctrs {
			what := fmt.Sprintf("container %s (%s, %s) carrying the token", c.name, shortID(c.id), c.state)
			for _, k := range []string{"container", "cgroups", "processes"} {
				if want(k) {
					seen[k] = append(seen[k], what)
				}
			}
		}
	}
	if want("processes") {
		procs, err := processesOutside(token, s.id)
		if err != nil {
			return nil, fmt.Errorf("looking for the plant of %s: %w", s.id, err)
		}
		seen["processes"] = append(seen["processes"], procs...)
	}
	if want("mounts") {
		vols, err := s.tokenVolumes(ctx, token)
		if err != nil {
			return nil, fmt.Errorf("looking for the plant of %s: %w", s.id, err)
		}
		for _, v := range vols {
			seen["mounts"] = append(seen["mounts"], "volume "+v+" carrying the token")
		}
	}
	if want("network") {
		nets, err := s.tokenNetworks(ctx, token)
		if err != nil {
			return nil, fmt.Errorf("looking for the plant of %s: %w", s.id, err)
		}
		for _, n := range nets {
			seen["network"] = append(seen["network"], "network "+n+" carrying the token")
		}
	}
	if want("scratch") {
		for _, d := range s.hostDirs {
			p := filepath.Join(d, probes.TeardownPrefix+token)
			// Lstat: whatever the box left there is seen, never followed.
			if fi, err := os.Lstat(p); err == nil && fi.Mode().IsRegular() {
				seen["scratch"] = append(seen["scratch"], "file "+p)
			}
		}
	}
	return seen, nil
}

// processesOutside lists host processes carrying the token (command line
// or environment) whose cgroup does not name the container id: what the
// box started outside itself.
func processesOutside(token, id string) ([]string, error) {
	pids, err := procPIDs()
	if err != nil {
		return nil, err
	}
	var out []string
	for _, pid := range pids {
		dir := filepath.Join("/proc", strconv.Itoa(pid))
		cmd := bounded.ReadFile(filepath.Join(dir, "cmdline"), maxProcFile)
		if !bytes.Contains(cmd, []byte(token)) && !bytes.Contains(bounded.ReadFile(filepath.Join(dir, "environ"), maxProcFile), []byte(token)) {
			continue
		}
		cg := bounded.ReadFile(filepath.Join(dir, "cgroup"), maxProcFile)
		if len(cg) == 0 || bytes.Contains(cg, []byte(id)) {
			// Inside the sandbox (or gone, or unreadable): not seen outside.
			continue
		}
		out = append(out, fmt.Sprintf("host process %d (%s) carrying the token outside the sandbox's cgroup", pid, printable(cmd, 160)))
	}
	return out, nil
}
