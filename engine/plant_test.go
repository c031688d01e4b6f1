package engine

import (
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sandcheck/sandcheck/runners"
)

// TestPlantAvenues: the host rules out a plant only from its own view: a
// hardened box (read-only folder without sockets, tmpfs, no privilege)
// has none; a socket bound in, a folder holding one, a writable host
// folder, privilege, a host-reaching capability, the host's PID namespace
// or a view that cannot tell its mounts each leave one open.
func TestPlantAvenues(t *testing.T) {
	dir := t.TempDir()
	plain := filepath.Join(dir, "inputs")
	sockDir := filepath.Join(dir, "run")
	for _, d := range []string{plain, sockDir} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(plain, "a.txt"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(sockDir, "engine.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })

	probe := runners.Mount{Type: "bind", Source: dir, Destination: runners.ProbeMount, ReadOnly: true}
	hardened := func() *runners.RuntimeView {
		return &runners.RuntimeView{CapDrop: []string{"ALL"}, Mounts: []runners.Mount{
			probe,
			{Type: "bind", Source: plain, Destination: "/inputs", ReadOnly: true},
			{Type: "tmpfs", Destination: "/scratch"},
		}}
	}
	kinds := []string{"scratch", "processes", "container", "network"}
	for _, tt := range []struct {
		name     string
		edit     func(v *runners.RuntimeView)
		pidHost  bool
		open     []string // kinds with an avenue
		mentions string
	}{
		{name: "hardened", edit: func(*runners.RuntimeView) {}},
		{name: "socket bound in", edit: func(v *runners.RuntimeView) {
			v.Mounts = append(v.Mounts, runners.Mount{Type: "bind", Source: sock, Destination: "/var/run/docker.sock"})
		}, open: []string{"processes", "container", "network"}, mentions: "socket " + sock},
		{name: "read-only folder holding a socket", edit: func(v *runners.RuntimeView) {
			v.Mounts = append(v.Mounts, runners.Mount{Type: "bind", Source: sockDir, Destination: "/run/x", ReadOnly: true})
		}, open: []string{"processes", "container", "network"}, mentions: "engine.sock"},
		{name: "writable host folder", edit: func(v *runners.RuntimeView) {
			v.Mounts = append(v.Mounts, runners.Mount{Type: "bind", Source: plain, Destination: "/share"})
		}, open: kinds, mentions: "writable host folder"},
		{name: "privileged", edit: func(v *runners.RuntimeView) { v.Privileged = true }, open: kinds, mentions: "privileged"},
		{name: "SYS_ADMIN", edit: func(v *runners.RuntimeView) { v.CapAdd = []string{"CAP_SYS_ADMIN"} }, open: kinds, mentions: "SYS_ADMIN"},
		{name: "host PID namespace", edit: func(*runners.RuntimeView) {}, pidHost: true, open: kinds, mentions: "PID namespace"},
		{name: "mounts unknown", edit: func(v *runners.RuntimeView) { v.Unknown = []string{"mounts"} }, open: kinds, mentions: "could not tell its mounts"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			v := hardened()
			tt.edit(v)
			got := plantAvenues(v, tt.pidHost, kinds)
			for _, k := range kinds {
				wantOpen := false
				for _, o := range tt.open {
					wantOpen = wantOpen || o == k
				}
				if (len(got[k]) > 0) != wantOpen {
					t.Errorf("%s: avenues %q, want open=%t", k, got[k], wantOpen)
				}
				if wantOpen && !strings.Contains(strings.Join(got[k], "; "), tt.mentions) {
					t.Errorf("%s: avenues %q do not name %q", k, got[k], tt.mentions)
				}
			}
		})
	}
	// No view at all: nothing can be ruled out.
	if got := plantAvenues(nil, false, []string{"container"}); len(got["container"]) == 0 {
		t.Error("no runtime view, yet no avenue: the host cannot rule a plant out without a view")
	}
}
