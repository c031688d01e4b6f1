//go:build linux && amd64

package tracer

import (
	"cmp"
	"errors"
	"fmt"
	"slices"

	"github.com/cilium/ebpf"
)

// sigs reads the kernel's counts of the watch's interesting calls by kind
// (bpf/tracer.c: sigs), without the trees' budget entries.
// It also returns each tree's budget entry: how many syscall events the
// tree streamed, by root.
func (w *Watch) sigs() (map[tracerSigKey]tracerSigVal, map[uint32]uint64, error) {
	var (
		k tracerSigKey
		v tracerSigVal
	)
	out := map[tracerSigKey]tracerSigVal{}
	budgets := map[uint32]uint64{}
	it := w.t.objs.Sigs.Iterate()
	for it.Next(&k, &v) {
		switch {
		case k.Ns != w.ns:
		case k.Nr == budgetNr:
			budgets[k.Root] = v.Calls
		default:
			out[k] = v
		}
	}
	if err := it.Err(); err != nil {
		return nil, nil, fmt.Errorf("reading the counts of interesting calls: %w", err)
	}
	return out, budgets, nil
}

// dropSigs deletes the watch's entries, budgets included, from the kernel's
// map of interesting calls.
func (w *Watch) dropSigs() error {
	var (
		k    tracerSigKey
		v    tracerSigVal
		mine []tracerSigKey
	)
	it := w.t.objs.Sigs.Iterate()
	for it.Next(&k, &v) {
		if k.Ns == w.ns {
			mine = append(mine, k)
		}
	}
	if err := it.Err(); err != nil {
		return fmt.Errorf("clearing the counts of interesting calls: %w", err)
	}
	for _, k := range mine {
		if err := w.t.objs.Sigs.Delete(k); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
			return fmt.Errorf("clearing the counts of interesting calls: %w", err)
		}
	}
	return nil
}

// applySigs sets each kept syscall event's Calls from the kernel's count of
// its kind, and counts the kinds no kept event stands for in their tree's
// Unitemized.
func applySigs(r *Report, sigs map[tracerSigKey]tracerSigVal) {
	itemized := map[tracerSigKey]bool{}
	for _, t := range r.Trees {
		for i := range t.Events {
			ev := &t.Events[i]
			if ev.sig == nil {
				continue
			}
			if v, ok := sigs[*ev.sig]; ok && !itemized[*ev.sig] {
				ev.Calls = v.Calls
				itemized[*ev.sig] = true
			}
		}
	}
	for k, v := range sigs {
		t := r.Trees[k.Root]
		if t == nil {
			t = &Tree{Root: k.Root, Syscalls: map[string]Count{}}
			r.Trees[k.Root] = t
		}
		t.Kinds = append(t.Kinds, CallKind{Syscall: SyscallName(int(k.Nr)), Errno: errnoName(int64(k.Err)),
			Key: k.Disc, Calls: v.Calls, Itemized: itemized[k]})
		if itemized[k] {
			continue
		}
		if t.Unitemized == nil {
			t.Unitemized = map[string]uint64{}
		}
		t.Unitemized[SyscallName(int(k.Nr))] += v.Calls
	}
	for _, t := range r.Trees {
		slices.SortFunc(t.Kinds, func(a, b CallKind) int {
			return cmp.Or(cmp.Compare(a.Syscall, b.Syscall), cmp.Compare(a.Key, b.Key), cmp.Compare(a.Errno, b.Errno))
		})
	}
}
