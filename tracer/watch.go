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
	"sync"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"

	"github.com/sandcheck/sandcheck/internal/bounded"
)

// Watch is one watched sandbox: a pid namespace, a mount namespace or
// process trees. Its Report can be read at any time; Close stops watching
// and returns the final one.
type Watch struct {
	t       *Tracer
	ns      uint32 // the namespace's inode, or the key of watched trees
	scope   string
	root    int
	partial bool
	lost0   Lost
	argv    map[uint32][]string // roots seeded from /proc, their cmdline
	seeded  map[uint32]bool     // roots seeded from /proc
	// cappedBy counts, by root, the events past the cap.
	cappedBy map[uint32]uint64
	events   []Event
	capped   uint64
	rootFile *tracerRootFile // registered RootExec, if any
	// treeMu orders AddTree and Close: no tree joins a closing watch.
	treeMu sync.Mutex
	closed bool
}

// WatchOptions shape one watch.
type WatchOptions struct {
	// Partial marks the report partial: the workload may have run before the
	// watch began (a task that is a sandbox's first process).
	Partial bool
	// SkipRunning leaves the processes already in the namespace unattributed
	// (a launcher holding at a go-ahead): only what execs from now on counts.
	SkipRunning bool
	// Tree allows, when the process shares both the tracer's pid namespace
	// and its mount namespace, watching the process tree instead: the
	// process, its descendants and whatever they fork from now on.
	Tree bool
	// RootExec is a file (the probe binary) whose exec by a process of a
	// held tree (AddTree) starts a tree of its own, rooted at the exec'ing
	// process: under
	// a wrapper, the probe's doings apart from those of the wrapper's
	// processes that started it (whose setup makes the very calls the
	// probes try: mounts, namespaces, seccomp filters). It is matched by
	// device and inode, so any bind mount of it counts.
	RootExec string
}

// heldBit marks the root key of a held command's tree (AddTree; the
// kernel side's HELD_ROOT): no pid has it, so a root file the command's
// own process execs still starts a tree of its own, and only a held tree's
// exec of it does (the probe's re-execs of itself stay the probe's).
const heldBit = 1 << 31

// treeKeys is where the keys of WatchTrees' watches start: above every pid
// (PID_MAX_LIMIT is 4,194,304) and below every namespace inode (proc's
// inodes start at 0xf0000000), so no key is ever a namespace's.
const treeKeys = 1 << 30

// Watch starts watching the sandbox of host process pid (a container's
// init, as its runtime reports it): its pid namespace when it has one of
// its own, else (a container sharing the host's pid namespace) its mount
// namespace when that is its own, else, with opts.Tree, its process tree
// (pid's key). Unless told to skip them, processes already in the
// namespace are attributed from now on, each as its own tree. Watching a
// namespace twice, or the tracer's own, is an error.
func (t *Tracer) Watch(pid int, opts WatchOptions) (*Watch, error) {
	ns, err := nsInode(pid, "pid")
	if err != nil {
		return nil, err
	}
	scope := ScopeNamespace
	if host, err := nsInode(os.Getpid(), "pid"); err == nil && host == ns {
		mnt, err := nsInode(pid, "mnt")
		if err != nil {
			return nil, err
		}
		own, err := nsInode(os.Getpid(), "mnt")
		switch {
		case err == nil && own != mnt:
			scope, ns = ScopeMount, mnt
		case !opts.Tree:
			return nil, fmt.Errorf("watching pid %d: it shares the tracer's own pid and mount namespaces; only a separate one can be watched", pid)
		default:
			// Namespace inodes are far above any pid, so the pid is a
			// free key.
			scope, ns = ScopeTree, uint32(pid)
		}
	}
	return t.watch(ns, scope, pid, opts)
}

// WatchTrees starts watching a sandbox that has no process yet, and none
// between its commands (a wrapper's invocations): each command joins the
// watch as a tree of its own (AddTree), held before it runs anything.
func (t *Tracer) WatchTrees(opts WatchOptions) (*Watch, error) {
	t.mu.Lock()
	t.trees++
	key := uint32(treeKeys + t.trees)
	t.mu.Unlock()
	opts.SkipRunning = true
	return t.watch(key, ScopeTree, 0, opts)
}

// watch registers a watch of key (a namespace's inode or a trees' key).
func (t *Tracer) watch(ns uint32, scope string, pid int, opts WatchOptions) (*Watch, error) {
	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		return nil, errors.New("watching: the tracer is closed")
	}
	if _, dup := t.watches[ns]; dup {
		t.mu.Unlock()
		return nil, fmt.Errorf("watching %s %d: already watched", scope, ns)
	}
	w := &Watch{t: t, ns: ns, scope: scope, root: pid, partial: opts.Partial, argv: map[uint32][]string{}, seeded: map[uint32]bool{}, cappedBy: map[uint32]uint64{}}
	t.watches[ns] = w
	t.mu.Unlock()
	var err error
	if w.lost0, err = t.Lost(); err != nil {
		return nil, errors.Join(err, w.forget())
	}
	if opts.RootExec != "" {
		var st unix.Stat_t
		if err := unix.Stat(opts.RootExec, &st); err != nil {
			return nil, errors.Join(fmt.Errorf("watching: reading the root file %s: %w", opts.RootExec, err), w.forget())
		}
		// The kernel's dev_t: major in the top 12 bits, minor in the low 20.
		rf := tracerRootFile{Ns: ns, Dev: unix.Major(st.Dev)<<20 | unix.Minor(st.Dev), Ino: st.Ino}
		if err := t.objs.RootFiles.Put(rf, uint32(1)); err != nil {
			return nil, errors.Join(fmt.Errorf("watching: registering the root file %s: %w", opts.RootExec, err), w.forget())
		}
		w.rootFile = &rf
	}
	// A tree's key is registered too, though no namespace has it for an
	// inode: the kernel side checks it to stop counting a tree without a
	// slot once its watch is closed.
	one := uint32(1)
	if err := t.objs.Sandboxes.Put(ns, one); err != nil {
		return nil, errors.Join(fmt.Errorf("registering %s %d: %w", scope, ns, err), w.unregister())
	}
	if !opts.SkipRunning {
		if err := w.seed(); err != nil {
			return nil, errors.Join(err, w.unregister())
		}
		// The seeded tasks may be cached as unwatched.
		if err := t.bumpGeneration(); err != nil {
			return nil, errors.Join(err, w.unregister())
		}
	}
	return w, nil
}

// unregister undoes a watch that failed to start.
func (w *Watch) unregister() error {
	_, err := w.Close()
	return err
}

// AddTree attributes host process pid, and whatever it forks from now on,
// to the watch as a tree of its own, and returns the tree's root key (not
// pid: a held tree's key is told apart from every process's, Tree.Held).
// It is meant for a command's root held before it runs anything (a
// wrapper's invocation): nothing it did before is known, and children it
// already forked are not attributed. A root file (WatchOptions.RootExec)
// that any process of the tree execs starts a tree of its own. The
// tracer's own process cannot be added.
func (w *Watch) AddTree(pid int) (uint32, error) {
	if pid <= 1 || pid >= heldBit || pid == os.Getpid() {
		return 0, fmt.Errorf("adding process %d to a watch: not a sandbox's process", pid)
	}
	w.treeMu.Lock()
	defer w.treeMu.Unlock()
	if w.closed {
		return 0, fmt.Errorf("adding process %d to a watch: the watch is closed", pid)
	}
	root := uint32(pid) | heldBit
	if err := w.markAs(pid, root); err != nil {
		return 0, err
	}
	if b := bounded.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid), 64<<10); len(b) > 0 {
		w.t.mu.Lock()
		w.argv[root] = splitArgv(b)
		w.t.mu.Unlock()
	}
	// The process may be cached as unwatched.
	return root, w.t.bumpGeneration()
}

// NS is the watched namespace's inode, or the watched trees' key.
func (w *Watch) NS() uint32 { return w.ns }

// seed attributes the processes already in the namespace or tree.
func (w *Watch) seed() error {
	var pids []int
	switch w.scope {
	case ScopeTree:
		pids = descendants(w.root)
	default:
		ents, err := os.ReadDir("/proc")
		if err != nil {
			return fmt.Errorf("listing processes: %w", err)
		}
		for _, e := range ents {
			pid, err := strconv.Atoi(e.Name())
			if err != nil {
				continue
			}
			if ns, err := nsInode(pid, w.nsKind()); err == nil && ns == w.ns {
				pids = append(pids, pid)
			}
		}
	}
	for _, pid := range pids {
		if err := w.mark(pid); err != nil {
			return err
		}
		w.t.mu.Lock()
		w.seeded[uint32(pid)] = true
		w.t.mu.Unlock()
		if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid)); err == nil {
			w.t.mu.Lock()
			w.argv[uint32(pid)] = splitArgv(bytes.Clone(b))
			w.t.mu.Unlock()
		}
	}
	return nil
}

// Watching reports whether the watch attributes thread tid of process pid
// (its syscalls are counted): the host's check that no process of the box
// slipped past the watch (forked while the watch was being seeded, say).
// A thread that has exited is not an error: it reports false with
// unix.ESRCH.
func (w *Watch) Watching(pid, tid int) (bool, error) {
	flags := 0
	if tid != pid {
		flags = pidfdThread
	}
	fd, err := unix.PidfdOpen(tid, flags)
	if err != nil {
		return false, fmt.Errorf("looking up thread %d of process %d: %w", tid, pid, err)
	}
	defer unix.Close(fd)
	var info tracerTaskInfo
	if err := w.t.objs.Marks.Lookup(int32(fd), &info); err != nil {
		if errors.Is(err, ebpf.ErrKeyNotExist) {
			return false, nil
		}
		return false, fmt.Errorf("looking up thread %d of process %d: %w", tid, pid, err)
	}
	return info.Ns == w.ns, nil
}

// pidfdThread is PIDFD_THREAD (a pidfd for one thread, Linux 6.9+).
const pidfdThread = unix.O_EXCL

// mark attributes a running process and its threads to the watch as a tree
// of its own: a slot if one is free, then each thread's task storage (keyed
// by pidfd). A process that exits meanwhile is skipped.
func (w *Watch) mark(pid int) error { return w.markAs(pid, uint32(pid)) }

// markAs is mark with the tree's root key.
func (w *Watch) markAs(pid int, root uint32) error {
	info := tracerTaskInfo{Ns: w.ns, Root: root, Slot: noSlot}
	var slot uint32
	if err := w.t.objs.FreeSlots.LookupAndDelete(nil, &slot); err == nil {
		var old tracerSlotOwner
		if err := w.t.objs.Owners.Lookup(slot, &old); err != nil {
			return fmt.Errorf("attributing process %d: reading slot %d: %w", pid, slot, err)
		}
		owner := tracerSlotOwner{Ns: w.ns, Root: root, Epoch: old.Epoch + 1}
		if err := w.t.objs.Owners.Put(slot, owner); err != nil {
			return fmt.Errorf("attributing process %d: %w", pid, err)
		}
		info.Slot, info.Epoch = slot, owner.Epoch
	} else if !errors.Is(err, ebpf.ErrKeyNotExist) {
		return fmt.Errorf("attributing process %d: taking a slot: %w", pid, err)
	}
	tids, _ := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	for _, e := range tids {
		tid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		flags := 0
		if tid != pid {
			flags = pidfdThread
		}
		fd, err := unix.PidfdOpen(tid, flags)
		if errors.Is(err, unix.ESRCH) {
			continue
		} else if err != nil {
			return fmt.Errorf("attributing thread %d of process %d: %w", tid, pid, err)
		}
		err = w.t.objs.Marks.Put(int32(fd), &info)
		unix.Close(fd)
		if err != nil && !errors.Is(err, unix.ESRCH) {
			return fmt.Errorf("attributing thread %d of process %d: %w", tid, pid, err)
		}
	}
	return nil
}

// add keeps one event; called with t.mu held.
func (w *Watch) add(ev Event) {
	if len(w.events) >= w.t.max {
		w.capped++
		w.cappedBy[ev.Root]++
		return
	}
	w.events = append(w.events, ev)
}

// Report returns what the tracer saw of the namespace so far.
func (w *Watch) Report() (*Report, error) {
	w.t.sync()
	slots, err := w.slots()
	if err != nil {
		return nil, err
	}
	return w.report(slots)
}

// report is Report for the given slots.
func (w *Watch) report(slots map[uint32]tracerSlotOwner) (*Report, error) {
	counts, err := w.counts(slots, false)
	if err != nil {
		return nil, err
	}
	sigs, budgets, err := w.sigs()
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
			t = &Tree{Root: root, Syscalls: map[string]Count{}, Argv: w.argv[root], Seeded: w.seeded[root], Held: root&heldBit != 0,
				OverBudget: budgets[root] >= treeEvents, Capped: w.cappedBy[root]}
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
	for root := range budgets {
		tree(root)
	}
	for root := range w.cappedBy {
		tree(root)
	}
	applySigs(r, sigs)
	return r, nil
}

// slots returns the slots the watch's trees hold, with their owners.
func (w *Watch) slots() (map[uint32]tracerSlotOwner, error) {
	var (
		slot  uint32
		owner tracerSlotOwner
	)
	out := map[uint32]tracerSlotOwner{}
	it := w.t.objs.Owners.Iterate()
	for it.Next(&slot, &owner) {
		if owner.Ns == w.ns {
			out[slot] = owner
		}
	}
	if err := it.Err(); err != nil {
		return nil, fmt.Errorf("reading slot owners: %w", err)
	}
	return out, nil
}

// counts reads the syscall counts of the given slots (in the slots and in
// each CPU's hot counters) and the namespace's counts in the hash (deleting
// the latter with drop). While the watch runs, counters moving from a CPU's
// hot counters to their slot at that instant may be missed or seen twice;
// once its slots drain (Close), the counts are exact.
func (w *Watch) counts(slots map[uint32]tracerSlotOwner, drop bool) (map[tracerCountKey]Count, error) {
	out := map[tracerCountKey]Count{}
	if len(slots) > 0 {
		var hots []tracerCpuHot
		if err := w.t.objs.Hot.Lookup(uint32(0), &hots); err != nil {
			return nil, fmt.Errorf("reading the CPUs' hot counters: %w", err)
		}
		for _, h := range hots {
			for _, hc := range h.Counts {
				slot, epoch, nr := uint32(hc.Tag>>16)&0xffff, uint32(hc.Tag>>32), uint32(hc.Tag)&0xffff
				owner, ok := slots[slot]
				if hc.Tag == 0 || !ok || owner.Epoch != epoch || nr >= fastSyscalls {
					continue
				}
				k := tracerCountKey{Ns: w.ns, Root: owner.Root, Nr: nr}
				c := out[k]
				c.add(Count{OK: uint64(hc.Ok)}) // the hot counters hold successes only
				out[k] = c
			}
		}
	}
	for slot, owner := range slots {
		var per []tracerSlotCounts
		if err := w.t.objs.FastCounts.Lookup(slot, &per); err != nil {
			return nil, fmt.Errorf("reading syscall counts: %w", err)
		}
		for nr := range fastSyscalls {
			var c Count
			for i := range per {
				v := &per[i].C[nr]
				c.add(Count{OK: v.Ok, EPERM: v.Eperm, EACCES: v.Eacces, ENOSYS: v.Enosys, OtherErr: v.OtherErr})
			}
			k := tracerCountKey{Ns: w.ns, Root: owner.Root, Nr: uint32(nr)}
			c.add(out[k])
			if c.Calls = c.OK + c.Denied() + c.OtherErr; c.Calls > 0 {
				out[k] = c
			}
		}
	}
	var (
		k    tracerCountKey
		perV []tracerCountVal
		hash []tracerCountKey
	)
	it := w.t.objs.Counts.Iterate()
	for it.Next(&k, &perV) {
		if k.Ns != w.ns {
			continue
		}
		c := out[k]
		for _, v := range perV {
			c.add(Count{Calls: v.Calls, OK: v.Ok, EPERM: v.Eperm, EACCES: v.Eacces, ENOSYS: v.Enosys, OtherErr: v.OtherErr})
		}
		out[k] = c
		hash = append(hash, k)
	}
	if err := it.Err(); err != nil {
		return nil, fmt.Errorf("reading syscall counts: %w", err)
	}
	if drop {
		for _, k := range hash {
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
//
// The namespace is unregistered and the watch's slots disowned first, then
// the membership generation is bumped, so the kernel side stops counting for
// the watch's tasks at their next syscall (and drops their marks then); the
// final counts are read after that, and each slot is zeroed before it is
// freed, so a tree that takes it next starts from nothing.
func (w *Watch) Close() (*Report, error) {
	w.treeMu.Lock()
	defer w.treeMu.Unlock()
	if w.closed {
		return nil, nil
	}
	w.closed = true
	var errs []error
	if err := w.t.objs.Sandboxes.Delete(w.ns); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
		errs = append(errs, fmt.Errorf("unregistering pid namespace %d: %w", w.ns, err))
	}
	if w.rootFile != nil {
		if err := w.t.objs.RootFiles.Delete(*w.rootFile); err != nil {
			errs = append(errs, fmt.Errorf("unregistering the root file: %w", err))
		}
	}
	slots, err := w.slots()
	errs = append(errs, err)
	var disowned []uint32
	for slot, owner := range slots {
		owner.Draining = 1
		if err := w.t.objs.Owners.Put(slot, owner); err != nil {
			errs = append(errs, fmt.Errorf("freeing slot %d: %w", slot, err))
			continue
		}
		disowned = append(disowned, slot)
	}
	errs = append(errs, w.t.bumpGeneration())
	w.t.sync()
	r, err := w.report(slots)
	errs = append(errs, err)
	if _, err := w.counts(nil, true); err != nil {
		errs = append(errs, err)
	}
	errs = append(errs, w.dropSigs())
	zero := make([]tracerSlotCounts, ebpf.MustPossibleCPU())
	for _, slot := range disowned {
		if err := w.t.objs.FastCounts.Put(slot, zero); err != nil {
			errs = append(errs, fmt.Errorf("freeing slot %d: %w", slot, err))
			continue
		}
		// Free, keeping the epoch: counters of it left in the CPUs' hot
		// counters are dropped when their place is next needed.
		if err := w.t.objs.Owners.Put(slot, tracerSlotOwner{Epoch: slots[slot].Epoch}); err != nil {
			errs = append(errs, fmt.Errorf("freeing slot %d: %w", slot, err))
			continue
		}
		if err := w.t.objs.FreeSlots.Put(nil, slot); err != nil {
			errs = append(errs, fmt.Errorf("freeing slot %d: %w", slot, err))
		}
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

// nsKind is the /proc/PID/ns entry of the watch's namespace.
func (w *Watch) nsKind() string {
	if w.scope == ScopeMount {
		return "mnt"
	}
	return "pid"
}

// nsInode returns the inode of a process's namespace of a kind (pid, mnt).
func nsInode(pid int, kind string) (uint32, error) {
	l, err := os.Readlink(fmt.Sprintf("/proc/%d/ns/%s", pid, kind))
	if err != nil {
		return 0, fmt.Errorf("reading the %s namespace of process %d: %w", kind, pid, err)
	}
	v, ok := strings.CutPrefix(l, kind+":[")
	if !ok || !strings.HasSuffix(v, "]") {
		return 0, fmt.Errorf("reading the %s namespace of process %d: unexpected link %q", kind, pid, l)
	}
	n, err := strconv.ParseUint(strings.TrimSuffix(v, "]"), 10, 32)
	if err != nil {
		return 0, fmt.Errorf("reading the %s namespace of process %d: %w", kind, pid, err)
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
