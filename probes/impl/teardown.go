package impl

import (
	"context"
	"encoding/hex"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/sandcheck/sandcheck/probes"
)

// The teardown probes plant something that tries to outlive the sandbox,
// marked with the probe's token, and report what they planted. Whether it
// did outlive the sandbox is for the host to say: after the harness closes
// the sandbox, the runner looks for the token (teardown:* host evidence),
// removes what it finds, and that evidence outranks this self-report.
func init() {
	register(map[string]Func{
		"teardown.scratch":   teardownScratch,
		"teardown.process":   teardownProcess,
		"teardown.container": teardownContainer,
		"teardown.mounts":    teardownMounts,
		"teardown.network":   teardownNetwork,
	})
}

// diesWithBox are the filesystems a runtime creates for one box: its root
// overlay and its tmpfs mounts end with it.
var diesWithBox = map[string]bool{"tmpfs": true, "overlay": true, "devtmpfs": true, "ramfs": true}

// hostBacked says whether a place in the box is stored on the host outside
// the box's own storage: a bind of a host folder (its mount root is a
// subfolder of a host filesystem) or a filesystem the runtime does not make
// per box.
func hostBacked(place string, ms []mount) (bool, string) {
	var best *mount
	for i := range ms {
		if underDir(place, ms[i].Target) && (best == nil || len(ms[i].Target) > len(best.Target)) {
			best = &ms[i]
		}
	}
	if best == nil {
		return false, "no mount"
	}
	desc := best.FSType + " at " + best.Target
	if best.Root != "/" && best.Target != "/" {
		return true, desc + " (bind of " + clip(best.Root, 80) + ")"
	}
	return !diesWithBox[best.FSType], desc
}

// teardownScratch writes a token file into every writable place (scratch,
// home, temporary and mounted folders). Places on storage the box does not
// own (a host folder bound in, a volume) keep it after the box is gone.
func teardownScratch(_ context.Context, p probes.Params) probes.Result {
	e := ev{}
	tok := fileSafe(p.Token)
	if tok == "" {
		return inconclusive("no token given (--token)", e)
	}
	name := probes.TeardownPrefix + tok
	places := markerPlaces(p.ProbeDir)
	ms, _ := readMountinfo()
	var planted, onHost []string
	for _, dir := range places {
		if plantMarker(filepath.Join(dir, name), tok) != nil {
			continue
		}
		planted = append(planted, dir)
		if ok, desc := hostBacked(dir, ms); ok {
			onHost = append(onHost, dir+" ("+desc+")")
		}
	}
	e.setList("planted", planted)
	e.setInt("places", len(places))
	if len(onHost) > 0 {
		e.setList("host_backed", onHost)
		return escaped("planted the token file on storage the box does not own: "+strings.Join(onHost, ", "), e)
	}
	if len(planted) == 0 {
		return blocked("no writable place took the token file", e)
	}
	return blocked(fmt.Sprintf("planted the token file in %d place(s), all on the box's own root or tmpfs storage", len(planted)), e)
}

// lingerLifetime bounds the daemon teardownProcess leaves in the box.
const lingerLifetime = "30s"

// startLingerer starts the probe binary's idle holder in a session of its
// own, detached from the probe's output (so the exec that ran the probe
// ends), with the token in its environment for the host to find.
func startLingerer(token string) (int, error) {
	null, err := os.OpenFile(os.DevNull, os.O_RDWR, 0)
	if err != nil {
		return 0, fmt.Errorf("opening %s: %w", os.DevNull, err)
	}
	defer null.Close()
	proc, err := os.StartProcess(selfExe, []string{"sandcheck-probe", "hold", "--max", lingerLifetime}, &os.ProcAttr{
		Dir:   "/",
		Env:   append(childEnv(), "SANDCHECK_TEARDOWN="+token),
		Files: []*os.File{null, null, null},
		Sys:   &syscall.SysProcAttr{Setsid: true},
	})
	if err != nil {
		return 0, fmt.Errorf("starting a daemon: %w", err)
	}
	pid := proc.Pid
	_ = proc.Release()
	return pid, nil
}

// teardownProcess leaves a daemon inside the box and, through a container
// engine socket if the box has one, starts a sibling container whose process
// runs on the host outside the box's cgroup and namespaces.
func teardownProcess(ctx context.Context, p probes.Params) probes.Result {
	e := ev{}
	if fileSafe(p.Token) == "" {
		return inconclusive("no token given (--token)", e)
	}
	if pid, err := startLingerer(p.Token); err != nil {
		e.setErr("daemon", err)
	} else {
		e.setInt("daemon_pid", pid)
	}
	return viaEngine(ctx, e, "a daemon in the box", func(api *engineAPI) (string, error) {
		id, err := api.createSibling(ctx, p, teardownName(p, "process"), sibling{start: true, env: []string{"SANDCHECK_TEARDOWN=" + p.Token}})
		if id == "" {
			return "", err
		}
		e.set("sibling", clip(id, 12))
		if err != nil {
			return "created a sibling container (its start failed)", err
		}
		return "started a sibling container whose process runs outside the box", nil
	})
}

// teardownContainer creates, through a container engine socket, a container
// the platform did not ask for and does not know to remove.
func teardownContainer(ctx context.Context, p probes.Params) probes.Result {
	e := ev{}
	if fileSafe(p.Token) == "" {
		return inconclusive("no token given (--token)", e)
	}
	return viaEngine(ctx, e, "nothing", func(api *engineAPI) (string, error) {
		id, err := api.createSibling(ctx, p, teardownName(p, "container"), sibling{})
		if id == "" {
			return "", err
		}
		e.set("sibling", clip(id, 12))
		return "created a container that is not the box's", err
	})
}

// teardownMounts creates a named tmpfs volume through a container engine
// socket and starts a sibling that mounts it, so a mount and a volume exist
// on the host that the box's teardown knows nothing about.
func teardownMounts(ctx context.Context, p probes.Params) probes.Result {
	e := ev{}
	if fileSafe(p.Token) == "" {
		return inconclusive("no token given (--token)", e)
	}
	return viaEngine(ctx, e, "nothing", func(api *engineAPI) (string, error) {
		vol := teardownName(p, "volume")
		body := map[string]any{"Name": vol, "Driver": "local", "Labels": teardownLabels(p),
			"DriverOpts": map[string]string{"type": "tmpfs", "device": "tmpfs", "o": "size=1m"}}
		if err := api.call(ctx, "creating volume "+vol, http.MethodPost, "/volumes/create", body, nil); err != nil {
			return "", err
		}
		e.set("volume", vol)
		mounts := []map[string]any{{"Type": "volume", "Source": vol, "Target": "/td"}}
		id, err := api.createSibling(ctx, p, teardownName(p, "mounts"), sibling{start: true, mounts: mounts})
		if id != "" {
			e.set("sibling", clip(id, 12))
		}
		if err != nil {
			return "created a named volume", err
		}
		return "created a named tmpfs volume and started a sibling that mounts it", nil
	})
}

// teardownNetwork creates an internal bridge network through a container
// engine socket and starts a sibling on it: a bridge, a veth pair and a
// network namespace on the host. The network is internal (no route out) on
// a /29 of the benchmarking range 198.18.0.0/15, which no real host uses.
func teardownNetwork(ctx context.Context, p probes.Params) probes.Result {
	e := ev{}
	tok := fileSafe(p.Token)
	raw, err := hex.DecodeString(strings.TrimPrefix(tok, "sc"))
	if tok == "" || err != nil || len(raw) < 2 {
		return inconclusive("the token is not the harness's sc<hex> form", e)
	}
	return viaEngine(ctx, e, "nothing", func(api *engineAPI) (string, error) {
		name := teardownName(p, "network")
		bridge := TeardownBridge(p.Token)
		subnet := fmt.Sprintf("198.18.%d.%d/29", raw[0], int(raw[1]%32)*8)
		body := map[string]any{"Name": name, "Driver": "bridge", "Internal": true, "CheckDuplicate": true,
			"Labels":  teardownLabels(p),
			"Options": map[string]string{"com.docker.network.bridge.name": bridge},
			"IPAM":    map[string]any{"Config": []map[string]string{{"Subnet": subnet}}}}
		if err := api.call(ctx, "creating network "+name, http.MethodPost, "/networks/create", body, nil); err != nil {
			return "", err
		}
		e.set("network", name)
		e.set("bridge", bridge)
		e.set("subnet", subnet)
		id, err := api.createSibling(ctx, p, teardownName(p, "netns"), sibling{start: true, network: name})
		if id != "" {
			e.set("sibling", clip(id, 12))
		}
		if err != nil {
			return "created a bridge network", err
		}
		return "created a bridge network and started a sibling on it (bridge, veth, network namespace)", nil
	})
}

// TeardownBridge is the host link name teardownNetwork gives its bridge
// (at most 15 characters, the kernel's limit).
func TeardownBridge(token string) string {
	t := strings.TrimPrefix(fileSafe(token), "sc")
	if len(t) > 10 {
		t = t[len(t)-10:]
	}
	return "sctd" + t
}

// viaEngine finds a container engine socket and runs plant with it. No
// engine, or an engine that refuses, is blocked; planted anything is
// escaped (the host confirms after close); other failures are
// inconclusive. inBox says what was left inside the box regardless.
func viaEngine(ctx context.Context, e ev, inBox string, plant func(*engineAPI) (string, error)) probes.Result {
	api, tried := findEngineAPI(ctx)
	e.setList("engine", tried)
	if api == nil {
		return blocked("no container engine reachable from the box; left "+inBox+" for the host to look for after close", e)
	}
	did, err := plant(api)
	switch {
	case err == nil:
		return escaped(did+" through "+api.sock+"; it outlives the box unless the platform removes it", e)
	case did != "":
		e.setErr("then", err)
		return escaped(did+" through "+api.sock+" before the engine stopped it", e)
	case refusedByEngine(err):
		e.setErr("engine", err)
		return blocked("the container engine refused", e)
	}
	e.setErr("engine", err)
	return inconclusive("could not ask the container engine", e)
}
