//go:build linux && amd64

package tracer

import (
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/cilium/ebpf/link"
)

// BenchmarkTracerOverhead runs a syscall-heavy workload in a runc sandbox,
// alternately without the tracer, with a no-op program on sys_exit (what the
// kernel charges every syscall for having any program there, which no tracer
// on this tracepoint can avoid) and with the tracer watching it. It reports
// the ratio of the medians (with/without: the overhead; no-op/without: the
// kernel's share of it), the syscalls per second the tracer counted and
// anything lost. `make bench-tracer` runs it once (-benchtime 1x).
func BenchmarkTracerOverhead(b *testing.B) {
	for _, wl := range []struct{ mode, n string }{{"io", "200000"}, {"loop", "1000000"}} {
		b.Run(wl.mode, func(b *testing.B) {
			bin := buildSysloop(b)
			c := startContainer(b, "runc", bin)
			run := func() time.Duration {
				ns, err := strconv.ParseInt(c.exec(b, "/t/sysloop", wl.mode, wl.n), 10, 64)
				if err != nil {
					b.Fatalf("sysloop output: %v", err)
				}
				return time.Duration(ns)
			}
			noop, err := ebpf.NewProgram(&ebpf.ProgramSpec{Type: ebpf.RawTracepoint, License: "GPL",
				Instructions: asm.Instructions{asm.Mov.Imm(asm.R0, 0), asm.Return()}})
			if err != nil {
				b.Skipf("needs root and BPF: %v", err)
			}
			defer noop.Close()
			run() // warm up
			var off, empty, on []time.Duration
			var calls uint64
			var lost Lost
			for range 5 * b.N {
				off = append(off, run())
				l, err := link.AttachRawTracepoint(link.RawTracepointOptions{Name: "sys_exit", Program: noop})
				if err != nil {
					b.Fatalf("attaching a no-op program to sys_exit: %v", err)
				}
				empty = append(empty, run())
				l.Close()
				tr, err := New(Options{})
				if err != nil {
					b.Skipf("needs root and BPF: %v", err)
				}
				w, err := tr.Watch(c.pid(b), WatchOptions{})
				if err != nil {
					b.Fatal(err)
				}
				d := run()
				on = append(on, d)
				rep, err := w.Close()
				if err != nil {
					b.Fatal(err)
				}
				tr.Close()
				var n uint64
				for _, t := range rep.Trees {
					if t.Exe == "/t/sysloop" {
						for _, cnt := range t.Syscalls {
							n += cnt.Calls
						}
					}
				}
				calls = max(calls, uint64(float64(n)/d.Seconds()))
				lost.Events += rep.Lost.Events
				lost.Tasks += rep.Lost.Tasks
				lost.Counts += rep.Lost.Counts
				lost.Capped += rep.Lost.Capped
			}
			mOff, mEmpty, mOn := median(off), median(empty), median(on)
			ratio, floor := float64(mOn)/float64(mOff), float64(mEmpty)/float64(mOff)
			b.ReportMetric(ratio, "ratio")
			b.ReportMetric(floor, "noop-ratio")
			b.ReportMetric(float64(calls), "syscalls/s")
			b.ReportMetric(float64(lost.Events+lost.Tasks+lost.Counts+lost.Capped), "lost")
			b.Logf("%s %s: median without tracer %s, with a no-op sys_exit program %s, with the tracer %s: "+
				"ratio %.3f (overhead %+.1f%%, of which the no-op program %+.1f%%); %d syscalls/s seen; lost %+v",
				wl.mode, wl.n, mOff, mEmpty, mOn, ratio, (ratio-1)*100, (floor-1)*100, calls, lost)
		})
	}
}

func median(d []time.Duration) time.Duration {
	d = slices.Clone(d)
	slices.Sort(d)
	return d[len(d)/2]
}
