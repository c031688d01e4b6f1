package engine

import (
	"crypto/rand"
	"encoding/hex"
	"log/slog"
	"os"
	"path/filepath"
	"sync"

	"github.com/sandcheck/sandcheck/evidence"
	"github.com/sandcheck/sandcheck/probes"
	"github.com/sandcheck/sandcheck/targets"
)

// honey plants honeyfiles in every host folder a sandbox has bind-mounted, so
// that a probe that reads one proves host files are reachable from inside.
// Each honeyfile holds a token only the host knows; all are removed at Close.
type honey struct {
	mu      sync.Mutex
	token   string
	name    string
	planted map[string]bool
}

func newHoney(runID string) *honey {
	b := make([]byte, 12)
	_, _ = rand.Read(b)
	return &honey{token: "honey-" + hex.EncodeToString(b), name: probes.HoneyPrefix + runID, planted: map[string]bool{}}
}

// plantMounts writes the honeyfile into each bind-mount source folder of the
// target, before any sandbox starts.
func (h *honey) plantMounts(mounts []targets.Mount, log *slog.Logger) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, m := range mounts {
		fi, err := os.Lstat(m.Source)
		if err != nil || !fi.IsDir() {
			continue
		}
		p := filepath.Join(m.Source, h.name)
		if h.planted[p] {
			continue
		}
		if err := os.WriteFile(p, []byte(h.token+"\n"), 0o644); err != nil {
			log.Warn("planting honeyfile", "path", p, "err", err)
			continue
		}
		h.planted[p] = true
	}
}

// check says whether a token a probe reported is the planted one.
func (h *honey) check(reported string) (evidence.Item, bool) {
	if reported == "" {
		return evidence.Item{}, false
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if reported == h.token {
		return evidence.Item{Source: evidence.SourceCanary, Kind: "honeyfile", Indicates: probes.Escaped,
			Summary: "the probe read the honeyfile token the harness planted on the host"}, true
	}
	return evidence.Item{Source: evidence.SourceCanary, Kind: "honeyfile",
		Summary: "the probe reported a honeyfile token the harness did not plant in this run"}, true
}

// remove deletes every planted honeyfile (never following links).
func (h *honey) remove(log *slog.Logger) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for p := range h.planted {
		if err := os.Remove(p); err != nil && !os.IsNotExist(err) {
			log.Warn("removing honeyfile", "path", p, "err", err)
		}
		delete(h.planted, p)
	}
}
