//go:build !(linux && amd64)

package tracer

import (
	"errors"
	"fmt"
	"log/slog"
)

// ErrUnavailable means tracing cannot work here.
var ErrUnavailable = errors.New("tracer unavailable")

// DefaultSensitivePrefixes are the path prefixes whose opens become events.
var DefaultSensitivePrefixes []string

// Options configure a Tracer.
type Options struct {
	Logger            *slog.Logger
	SensitivePrefixes []string
	MaxEvents         int
}

// WatchOptions shape one watch.
type WatchOptions struct {
	Partial     bool
	SkipRunning bool
	Tree        bool
	RootExec    string
}

// Tracer is not available on this platform.
type Tracer struct{}

// Watch is not available on this platform.
type Watch struct{}

// New always fails: the BPF objects are built for linux/amd64 only.
func New(Options) (*Tracer, error) {
	return nil, fmt.Errorf("%w: the BPF programs are built for linux/amd64 only", ErrUnavailable)
}

// Close does nothing.
func (t *Tracer) Close() error { return nil }

// Watch always fails.
func (t *Tracer) Watch(int, WatchOptions) (*Watch, error) { return nil, ErrUnavailable }

// WatchTrees always fails.
func (t *Tracer) WatchTrees(WatchOptions) (*Watch, error) { return nil, ErrUnavailable }

// AddTree always fails.
func (w *Watch) AddTree(int) (uint32, error) { return 0, ErrUnavailable }

// Lost returns nothing.
func (t *Tracer) Lost() (Lost, error) { return Lost{}, ErrUnavailable }

// Events returns 0.
func (t *Tracer) Events() uint64 { return 0 }

// NS returns 0.
func (w *Watch) NS() uint32 { return 0 }

// Report always fails.
func (w *Watch) Report() (*Report, error) { return nil, ErrUnavailable }

// Close returns nothing.
func (w *Watch) Close() (*Report, error) { return nil, nil }

// Watching always fails.
func (w *Watch) Watching(int, int) (bool, error) { return false, ErrUnavailable }

// tracerSigKey stands in for the BPF program's key type (bpf2go makes it
// for linux/amd64), so Event has the same shape everywhere.
type tracerSigKey struct{}
