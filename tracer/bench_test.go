//go:build linux && amd64

package tracer

import (
	"slices"
	"strconv"
	"testing"
	"time"
)

// BenchmarkTracerOverhead runs a syscall-heavy workload in a runc sandbox,
// alternately without and with the tracer watching it, and reports the
// ratio of the medians, the syscalls per second the tracer counted and
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
			run() // warm up
			var off, on []time.Duration
			var calls uint64
			var lost Lost
			for range 5 * b.N {
				off = append(off, run())
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
			slices.Sort(off)
			slices.Sort(on)
			mOff, mOn := off[len(off)/2], on[len(on)/2]
			ratio := float64(mOn) / float64(mOff)
			b.ReportMetric(ratio, "ratio")
			b.ReportMetric(float64(calls), "syscalls/s")
			b.ReportMetric(float64(lost.Events+lost.Tasks+lost.Counts+lost.Capped), "lost")
			b.Logf("%s %s: median without tracer %s, with %s: ratio %.3f (overhead %+.1f%%); %d syscalls/s seen; lost %+v",
				wl.mode, wl.n, mOff, mOn, ratio, (ratio-1)*100, calls, lost)
		})
	}
}
