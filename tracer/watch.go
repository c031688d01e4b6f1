//go:build linux && amd64

package tracer

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// Watch is one watched pid namespace. Its Report can be read at any time;
// Close stops watching and returns the final one.
type Watch struct {
	t       *Tracer
	ns      uint32 // the namespace's inode, or the root pid of a watched tree
	scope   string
	root    int
	partial bool
	lost0   Lost
	argv    map[uint32][]string // roots seeded from /proc, their cmdline
	events  []Event
	capped  uint64
	closed  bool
}

// WatchOptions shape one watch.
type WatchOptions struct {
	// Partial marks the report partial: the workload may have run before the
	// watch began (a task that is a sandbox's first process).
	Partial bool
	// SkipRunning leaves the processes already in the namespace unattributed
	// (a launcher holding at a go-ahead): only what execs from now on counts.
	SkipRunning bool
	// Tree allows, when the process shares the tracer's pid namespace (as
	// gVisor's sentry does here: runsc-sandbox runs in the host's), watching
	// the process tree instead: the process, its descendants and whatever
	// they fork from now on.
	Tree bool
}

// Watch starts watching the pid namespace of host process pid (a container's
// init, as its runtime reports it). Unless told to skip them, processes
// already in the namespace are attributed from now on, each as its own tree.
// Watching a namespace twice, or the tracer's own, is an error.
func (t *Tracer) Watch(pid int, opts WatchOptions) (*Watch, error) {
	ns, err := pidNS(pid)
	if err != nil {
		return nil, err
	}
	scope := ScopeNamespace
	if host, err := pidNS(os.Getpid()); err == nil && host == ns {
		if !opts.Tree {
			return nil, fmt.Errorf("watching pid %d: it shares the tracer's own pid namespace; only a separate one can be watched", pid)
		}
		// Namespace inodes are far above any pid, so the pid is a free key.
		scope, ns = ScopeTree, uint32(pid)
	}
	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		return nil, errors.New("watching: the tracer is closed")
	}
	if _, dup := t.watches[ns]; dup {
		t.mu.Unlock()
		return nil, fmt.Errorf("watching pid namespace %d: already watched", ns)
	}
	w := &Watch{t: t, ns: ns, scope: scope, root: pid, partial: opts.Partial, argv: map[uint32][]string{}}
	t.watches[ns] = w
	t.mu.Unlock()
	if w.lost0, err = t.Lost(); err != nil {
		return nil, errors.Join(err, w.forget())
	}
	if scope == ScopeNamespace {
		one := uint32(1)
		if err := t.objs.Sandboxes.Put(ns, one); err != nil {
			return nil, errors.Join(fmt.Errorf("registering pid namespace %d: %w", ns, err), w.forget())
		}
	}
	if !opts.SkipRunning {
		if err := w.seed(); err != nil {
			return nil, errors.Join(err, w.forget())
		}
	}
	return w, nil
}

// NS is the watched pid namespace's inode.
func (w *Watch) NS() uint32 { return w.ns }

// seed attributes the processes already in the namespace or tree.
func (w *Watch) seed() error {
	var pids []int
	if w.scope == ScopeTree {
		pids = descendants(w.root)
	} else {
		ents, err := os.ReadDir("/proc")
		if err != nil {
			return fmt.Errorf("listing processes: %w", err)
		}
		for _, e := range ents {
			pid, err := strconv.Atoi(e.Name())
			if err != nil {
				continue
			}
			if ns, err := pidNS(pid); err == nil && ns == w.ns {
				pids = append(pids, pid)
			}
		}
	}
	for _, pid := range pids {
		info := tracerTaskInfo{Ns: w.ns, Root: uint32(pid)}
		if err := w.t.objs.Tasks.Put(uint32(pid), &info); err != nil {
			return fmt.Errorf("attributing process %d: %w", pid, err)
		}
		if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid)); err == nil {
			w.t.mu.Lock()
			w.argv[uint32(pid)] = splitArgv(bytes.Clone(b))
			w.t.mu.Unlock()
		}
	}
	return nil
}

// add keeps one event; called with t.mu held.
func (w *Watch) add(ev Event) {
	if len(w.events) >= w.t.max {
		w.capped++
		return
	}
	w.events = append(w.events, ev)
}

// Report returns what the tracer saw of the namespace so far.
func (w *Watch) Report() (*Report, error) {
	w.t.sync()
	counts, err := w.counts(false)
	if err != nil {
		return nil, err
	}
	lost, err := w.t.Lost()
	if err != nil {
		return nil, err
	}
	w.t.mu.Lock()
	defer w.t.mu.Unlock()
	r := &Report{NS: w.ns, Scope: w.scope, Partial: w.partial, Trees: map[uint32]*Tree{}, Lost: lost.sub(w.lost0)}
	r.Lost.Capped = w.capped
	tree := func(root uint32) *Tree {
		t := r.Trees[root]
		if t == nil {
			t = &Tree{Root: root, Syscalls: map[string]Count{}, Argv: w.argv[root]}
			r.Trees[root] = t
		}
		return t
	}
	for k, c := range counts {
		tree(k.Root).Syscalls[SyscallName(int(k.Nr))] = c
	}
	for _, ev := range w.events {
		t := tree(ev.Root)
		if ev.Kind == KindExec && ev.TGID == ev.Root && t.Exe == "" {
			t.Exe, t.Argv = ev.Path, ev.Argv
		}
		t.Events = append(t.Events, ev)
	}
	return r, nil
}

// counts reads (and with drop, deletes) the namespace's syscall counts.
func (w *Watch) counts(drop bool) (map[tracerCountKey]Count, error) {
	out := map[tracerCountKey]Count{}
	var (
		k   tracerCountKey
		per []tracerCountVal
	)
	it := w.t.objs.Counts.Iterate()
	for it.Next(&k, &per) {
		if k.Ns != w.ns {
			continue
		}
		var c Count
		for _, v := range per {
			c.add(Count{Calls: v.Calls, OK: v.Ok, EPERM: v.Eperm, EACCES: v.Eacces, ENOSYS: v.Enosys, OtherErr: v.OtherErr})
		}
		out[k] = c
	}
	if err := it.Err(); err != nil {
		return nil, fmt.Errorf("reading syscall counts: %w", err)
	}
	if drop {
		for k := range out {
			if err := w.t.objs.Counts.Delete(k); err != nil {
				return out, fmt.Errorf("clearing syscall counts: %w", err)
			}
		}
	}
	return out, nil
}

// Close stops watching, returns the final report and clears the
// namespace's state from the kernel maps. Safe twice (the second call returns
// nil and no error).
func (w *Watch) Close() (*Report, error) {
	if w.closed {
		return nil, nil
	}
	w.closed = true
	var errs []error
	if w.scope == ScopeNamespace {
		if err := w.t.objs.Sandboxes.Delete(w.ns); err != nil {
			errs = append(errs, fmt.Errorf("unregistering pid namespace %d: %w", w.ns, err))
		}
	}
	r, err := w.Report()
	errs = append(errs, err)
	var (
		k    uint32
		info tracerTaskInfo
		gone []uint32
	)
	it := w.t.objs.Tasks.Iterate()
	for it.Next(&k, &info) {
		if info.Ns == w.ns {
			gone = append(gone, k)
		}
	}
	errs = append(errs, it.Err())
	for _, k := range gone {
		_ = w.t.objs.Tasks.Delete(k) // the process may have exited meanwhile
	}
	if _, err := w.counts(true); err != nil {
		errs = append(errs, err)
	}
	errs = append(errs, w.forget())
	return r, errors.Join(errs...)
}

func (w *Watch) forget() error {
	w.t.mu.Lock()
	delete(w.t.watches, w.ns)
	w.t.mu.Unlock()
	return nil
}

// pidNS returns the inode of a process's pid namespace.
func pidNS(pid int) (uint32, error) {
	l, err := os.Readlink(fmt.Sprintf("/proc/%d/ns/pid", pid))
	if err != nil {
		return 0, fmt.Errorf("reading the pid namespace of process %d: %w", pid, err)
	}
	v, ok := strings.CutPrefix(l, "pid:[")
	if !ok || !strings.HasSuffix(v, "]") {
		return 0, fmt.Errorf("reading the pid namespace of process %d: unexpected link %q", pid, l)
	}
	n, err := strconv.ParseUint(strings.TrimSuffix(v, "]"), 10, 32)
	if err != nil {
		return 0, fmt.Errorf("reading the pid namespace of process %d: %w", pid, err)
	}
	return uint32(n), nil
}

// descendants lists pid and every process below it, from each thread's
// children list.
func descendants(pid int) []int {
	out := []int{pid}
	for i := 0; i < len(out) && i < 4096; i++ {
		tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/children", out[i]))
		for _, f := range tasks {
			b, err := os.ReadFile(f)
			if err != nil {
				continue
			}
			for _, c := range strings.Fields(string(b)) {
				if n, err := strconv.Atoi(c); err == nil && !slices.Contains(out, n) {
					out = append(out, n)
				}
			}
		}
	}
	return out
}
