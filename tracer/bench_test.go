//go:build linux && amd64

package tracer

import (
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/cilium/ebpf/link"
	"golang.org/x/sys/unix"
)

// BenchmarkTracerOverhead runs a syscall-heavy workload in a runc sandbox,
// alternately without the tracer, with a no-op program on sys_exit (what the
// kernel charges every syscall for having any program there, which no tracer
// on this tracepoint can avoid) and with the tracer watching it. The workload
// reports its wall time and the CPU time (user+system) its thread used; the
// CPU figure is the cost the tracer adds to the workload itself, while the
// wall figure also carries the wait for a core on a busy 2-core host. It
// reports the ratios of the medians (with/without: the overhead;
// no-op/without: the kernel's share of it), the syscalls per second the tracer
// counted and anything lost. Three workloads: "tree" walks and reads a tree
// of 512 files as a search through a source tree does (opens, reads,
// directory listings); "io" copies /dev/zero to /dev/null 4 KiB at a time;
// "loop" calls getppid, the cheapest syscall, so the tracer's share is the
// largest it can be. Afterwards one more run of each with BPF run-time
// statistics on reports what the sys_exit program itself costs per run, for
// the tracer and for the no-op. "host-io" is the io workload run on the host,
// outside any sandbox, while the tracer watches the sandbox: what the tracer
// costs every other process of the machine.
// `make bench-tracer` runs it once (-benchtime 1x).
func BenchmarkTracerOverhead(b *testing.B) {
	for _, wl := range []struct{ name, mode, n string }{
		{"tree", "tree", "40"}, {"io", "io", "200000"}, {"loop", "loop", "1000000"}, {"host-io", "io", "200000"},
	} {
		b.Run(wl.name, func(b *testing.B) {
			bin := buildSysloop(b)
			c := startContainer(b, "runc", bin)
			run := func() sample {
				var out string
				if wl.name == "host-io" {
					o, err := exec.Command(bin, wl.mode, wl.n).Output()
					if err != nil {
						b.Fatalf("sysloop on the host: %v", err)
					}
					out = string(o)
				} else {
					out = c.exec(b, "/t/sysloop", wl.mode, wl.n)
				}
				f := strings.Fields(out)
				if len(f) != 2 {
					b.Fatalf("sysloop output %q: want wall and CPU nanoseconds", f)
				}
				wall, err1 := strconv.ParseInt(f[0], 10, 64)
				cpu, err2 := strconv.ParseInt(f[1], 10, 64)
				if err1 != nil || err2 != nil || wall <= 0 || cpu <= 0 {
					b.Fatalf("sysloop output %q", f)
				}
				return sample{wall: time.Duration(wall), cpu: time.Duration(cpu)}
			}
			noop, err := ebpf.NewProgram(&ebpf.ProgramSpec{Type: ebpf.RawTracepoint, License: "GPL",
				Instructions: asm.Instructions{asm.Mov.Imm(asm.R0, 0), asm.Return()}})
			if err != nil {
				b.Skipf("needs root and BPF: %v", err)
			}
			defer noop.Close()
			run() // warm up
			var off, empty, on []sample
			var calls uint64
			var lost Lost
			// Each timed run starts on a settled machine: loading the
			// tracer parses the kernel's BTF, and the garbage collection
			// that follows, on the other core, would otherwise be charged
			// to the tracer's first timed run; every mode waits alike.
			settle := func() {
				runtime.GC()
				time.Sleep(500 * time.Millisecond)
			}
			for range rounds * b.N {
				settle()
				off = append(off, run())
				l, err := link.AttachRawTracepoint(link.RawTracepointOptions{Name: "sys_exit", Program: noop})
				if err != nil {
					b.Fatalf("attaching a no-op program to sys_exit: %v", err)
				}
				settle()
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
				settle()
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
				calls = max(calls, uint64(float64(n)/d.wall.Seconds()))
				lost.Events += rep.Lost.Events
				lost.Tasks += rep.Lost.Tasks
				lost.Counts += rep.Lost.Counts
				lost.Capped += rep.Lost.Capped
			}
			noopNS, tracerNS := programCost(b, noop, c.pid(b), run)
			ratio := func(a, b []time.Duration) float64 { return float64(median(a)) / float64(median(b)) }
			minRatio := func(a, b []time.Duration) float64 { return float64(slices.Min(a)) / float64(slices.Min(b)) }
			cpuRatio, cpuNoop := ratio(cpus(on), cpus(off)), ratio(cpus(empty), cpus(off))
			cpuMin, cpuNoopMin := minRatio(cpus(on), cpus(off)), minRatio(cpus(empty), cpus(off))
			wallRatio, wallNoop := ratio(walls(on), walls(off)), ratio(walls(empty), walls(off))
			// Each round's runs follow one another within seconds, so the
			// ratio within a round leaves out the drift of a shared
			// machine's load between rounds.
			paired := func(a, b []time.Duration) float64 {
				var r []float64
				for i := range a {
					r = append(r, float64(a[i])/float64(b[i]))
				}
				slices.Sort(r)
				return r[len(r)/2]
			}
			cpuPaired, cpuNoopPaired := paired(cpus(on), cpus(off)), paired(cpus(empty), cpus(off))
			b.ReportMetric(cpuRatio, "cpu-ratio")
			b.ReportMetric(wallRatio, "wall-ratio")
			b.ReportMetric(cpuNoop, "noop-cpu-ratio")
			b.ReportMetric(cpuMin, "min-cpu-ratio")
			b.ReportMetric(cpuPaired, "paired-cpu-ratio")
			b.ReportMetric(cpuNoopPaired, "paired-noop-cpu-ratio")
			b.ReportMetric(float64(calls), "syscalls/s")
			b.ReportMetric(float64(lost.Events+lost.Tasks+lost.Counts+lost.Capped), "lost")
			b.ReportMetric(tracerNS, "prog-ns/run")
			b.ReportMetric(noopNS, "noop-prog-ns/run")
			b.Logf("%s: %s %s, medians of %d alternating runs: CPU without tracer %s, with a no-op sys_exit program %s, with the tracer %s: "+
				"CPU overhead %+.1f%% (no-op program alone %+.1f%%), between the fastest runs of each %+.1f%% (no-op %+.1f%%); "+
				"median of the rounds' own ratios %+.1f%% (no-op %+.1f%%); "+
				"wall overhead %+.1f%% (no-op %+.1f%%); %d syscalls/s seen; lost %+v; "+
				"with BPF run-time statistics on, the sys_exit program took %.0f ns per run (the no-op %.0f ns); load average %s",
				wl.name, wl.mode, wl.n, len(on), median(cpus(off)), median(cpus(empty)), median(cpus(on)),
				(cpuRatio-1)*100, (cpuNoop-1)*100, (cpuMin-1)*100, (cpuNoopMin-1)*100, (cpuPaired-1)*100, (cpuNoopPaired-1)*100,
				(wallRatio-1)*100, (wallNoop-1)*100, calls, lost, tracerNS, noopNS, loadAvg())
		})
	}
}

// programCost runs the workload once with the no-op program and once with
// the tracer, with the kernel's BPF run-time statistics on (which add their
// own clock reads, so only these runs have them), and returns each sys_exit
// program's mean nanoseconds per run.
func programCost(b *testing.B, noop *ebpf.Program, pid int, run func() sample) (noopNS, tracerNS float64) {
	st, err := ebpf.EnableStats(uint32(unix.BPF_STATS_RUN_TIME))
	if err != nil {
		b.Fatalf("enabling BPF run-time statistics: %v", err)
	}
	defer st.Close()
	perRun := func(p *ebpf.Program, f func()) float64 {
		s0, err := p.Stats()
		if err != nil {
			b.Fatalf("reading BPF program statistics: %v", err)
		}
		f()
		s1, err := p.Stats()
		if err != nil {
			b.Fatalf("reading BPF program statistics: %v", err)
		}
		if s1.RunCount == s0.RunCount {
			b.Fatal("the sys_exit program never ran")
		}
		return float64(s1.Runtime-s0.Runtime) / float64(s1.RunCount-s0.RunCount)
	}
	l, err := link.AttachRawTracepoint(link.RawTracepointOptions{Name: "sys_exit", Program: noop})
	if err != nil {
		b.Fatalf("attaching a no-op program to sys_exit: %v", err)
	}
	noopNS = perRun(noop, func() { run() })
	l.Close()
	tr, err := New(Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer tr.Close()
	w, err := tr.Watch(pid, WatchOptions{})
	if err != nil {
		b.Fatal(err)
	}
	tracerNS = perRun(tr.objs.ScSysExit, func() { run() })
	if _, err := w.Close(); err != nil {
		b.Fatal(err)
	}
	return noopNS, tracerNS
}

// loadAvg is the machine's 1, 5 and 15 minute load averages, to read the
// figures by: on a shared machine other work inflates and blurs them.
func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ")
}

// rounds is how many times each mode runs per workload.
const rounds = 11

// sample is one workload run: wall time and the CPU time its thread used.
type sample struct{ wall, cpu time.Duration }

func walls(s []sample) []time.Duration {
	var d []time.Duration
	for _, x := range s {
		d = append(d, x.wall)
	}
	return d
}

func cpus(s []sample) []time.Duration {
	var d []time.Duration
	for _, x := range s {
		d = append(d, x.cpu)
	}
	return d
}

func median(d []time.Duration) time.Duration {
	d = slices.Clone(d)
	slices.Sort(d)
	return d[len(d)/2]
}
