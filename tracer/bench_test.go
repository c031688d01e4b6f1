//go:build linux && amd64

package tracer

import (
	"bufio"
	"errors"
	"fmt"
	"io"
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

// BenchmarkTracerOverhead measures what the tracer costs a syscall-heavy
// workload against what the kernel charges for any program on the
// tracer's tracepoints, which no tracer there can avoid. One process runs
// the workload again and again on one thread (sysloop serve), in a runc
// sandbox, in three modes interleaved run by run: with nothing attached,
// with an empty program (return 0) on each of the tracer's four BTF raw
// tracepoints, and with the tracer attached and watching the sandbox. The
// tracer is loaded and its watch opened once; between runs only the
// attachments change, so no run carries the tracer's loading (BTF parsing,
// garbage collection). Each of 11 rounds runs every mode 20 times, the
// order rotating run by run. A run's figure is the CPU time (user+system)
// of the workload's thread, read from its CPU clock: the cost added to the
// workload itself, without the wait for a core that the wall time also
// carries. A round's figure for a mode is its median run (its fastest run,
// printed beside it, swings more from round to round on a loaded machine).
//
// A mode's overhead is the median over the rounds of the round's ratio to
// the runs without anything attached (runs seconds apart, which leaves out
// a shared machine's drift between rounds). The criterion, per workload:
// the tracer's overhead within 1.5 times the empty program's; a PASS or
// FAIL line says so, with a note when the empty program's overhead is not
// resolved above the noise (fewer than 3 rounds in 4 saw it cost anything),
// where the ratio means little. Before and after each run the benchmark
// checks that no one else's program is on sys_exit (another tracer, such as
// a sandcheck run's, makes the runs without ours pay for one) and makes a
// run that had one again once it is gone; when it waited 3 minutes in all,
// it goes on, and the line says INVALID instead. The tracer must also have
// counted every syscall the workload made while it was attached.
//
// Workloads (each run a few milliseconds): "tree" walks and reads a tree of
// 512 files twice as a search through a source tree does (opens, reads,
// directory listings); "io" copies /dev/zero to /dev/null 4 KiB at a time;
// "loop" calls getppid, the cheapest syscall, so the programs' share is the
// largest it can be; "host-io" is the io workload on the host, outside any
// sandbox, while the tracer watches the sandbox: what the tracer costs every
// other process of the machine. Afterwards BPF run-time statistics give each
// sys_exit program's own nanoseconds per run (empty and tracer).
// `make bench-tracer` runs it once (-benchtime 1x).
func BenchmarkTracerOverhead(b *testing.B) {
	for _, wl := range benchWorkloads {
		b.Run(wl.name, func(b *testing.B) { benchOverhead(b, wl) })
	}
}

// benchWorkload is one workload of BenchmarkTracerOverhead: sysloop's mode
// and argument, and whether it runs on the host instead of in the sandbox.
type benchWorkload struct {
	name, mode, n string
	host          bool
}

var benchWorkloads = []benchWorkload{
	{name: "tree", mode: "tree", n: "2"},
	{name: "io", mode: "io", n: "10000"},
	{name: "loop", mode: "loop", n: "50000"},
	{name: "host-io", mode: "io", n: "10000", host: true},
}

const (
	// rounds is how many rounds each workload runs; repsPerMode is how
	// many runs of each mode a round has.
	rounds      = 11
	repsPerMode = 20
	// limitRatio is the criterion: the tracer's overhead within this
	// multiple of the empty program's.
	limitRatio = 1.5
)

// The modes a run is made in.
const (
	modeOff = iota
	modeEmpty
	modeTracer
	nModes
)

func benchOverhead(b *testing.B, wl benchWorkload) {
	bin := buildSysloop(b)
	c := startContainer(b, "runc", bin)
	srv := startServer(b, c, bin, wl)
	srv.run(b) // warm up
	empty := loadEmpty(b)
	tr, err := New(Options{})
	if errors.Is(err, ErrUnavailable) {
		b.Skipf("needs root and BPF: %v", err)
	} else if err != nil {
		b.Fatal(err)
	}
	defer tr.Close()
	w, err := tr.Watch(c.pid(b), WatchOptions{})
	if err != nil {
		b.Fatal(err)
	}
	att := &attachments{b: b, tr: tr, empty: empty, mode: modeTracer}
	defer att.set(modeOff)
	att.set(modeOff)

	// runs[m][r] are round r's runs in mode m.
	var runs [nModes][rounds][]sample
	var callsOn int64
	var wallOn time.Duration
	foreign := 0 // runs made while another program was on sys_exit
	var waited time.Duration
	for r := range rounds * b.N {
		for k := range repsPerMode {
			for i := range nModes {
				m := (i + r*repsPerMode + k) % nModes
				att.set(m)
				s, ok := cleanRun(b, att, srv, &waited)
				if !ok {
					foreign++
				}
				runs[m][r%rounds] = append(runs[m][r%rounds], s)
				if m == modeTracer {
					callsOn += s.calls
					wallOn += s.wall
				}
			}
		}
	}
	// A round's figure for a mode is its median run; the fastest is kept
	// to print beside it.
	var cpu, wall, cpuMin [nModes][rounds]time.Duration
	for m := range nModes {
		for r := range rounds {
			cpu[m][r] = median(cpus(runs[m][r]))
			wall[m][r] = median(walls(runs[m][r]))
			cpuMin[m][r] = slices.Min(cpus(runs[m][r]))
		}
	}
	emptyNS, tracerNS := programCost(b, att, srv)
	att.set(modeOff)
	rep, err := w.Close()
	if err != nil {
		b.Fatal(err)
	}
	if !wl.host {
		var counted uint64
		for _, t := range rep.Trees {
			if slices.Equal(t.Argv, []string{"/t/sysloop", "serve", wl.mode, wl.n}) {
				for _, cnt := range t.Syscalls {
					counted += cnt.Calls
				}
			}
		}
		if counted < uint64(callsOn) {
			b.Errorf("%s: the tracer counted %d syscalls of the workload, fewer than the %d it made while the tracer was attached",
				wl.name, counted, callsOn)
		}
	}

	trOver, emptyOver := pairedOverhead(cpu[modeTracer][:], cpu[modeOff][:]), pairedOverhead(cpu[modeEmpty][:], cpu[modeOff][:])
	trWall, emptyWall := pairedOverhead(wall[modeTracer][:], wall[modeOff][:]), pairedOverhead(wall[modeEmpty][:], wall[modeOff][:])
	trMin, emptyMin := pairedOverhead(cpuMin[modeTracer][:], cpuMin[modeOff][:]), pairedOverhead(cpuMin[modeEmpty][:], cpuMin[modeOff][:])
	emptyQ1, emptyQ3 := quartiles(cpu[modeEmpty][:], cpu[modeOff][:])
	trQ1, trQ3 := quartiles(cpu[modeTracer][:], cpu[modeOff][:])
	resolved := emptyQ1 > 0
	limit := limitRatio * emptyOver
	verdict := "PASS"
	if trOver > limit {
		verdict = "FAIL"
	}
	ratio := trOver / emptyOver
	note := ""
	if !resolved {
		note = " (the empty program's overhead is not resolved above the noise: the ratio means little)"
	}
	if foreign > 0 {
		// With another program on sys_exit, the runs without ours still
		// paid the kernel's price for one: nothing was measured.
		verdict = "INVALID"
		note += fmt.Sprintf(" (another program was on sys_exit during %d runs, after %s of waiting for it to go)", foreign, waited.Round(time.Second))
	}
	lost := rep.Lost
	b.ReportMetric(trOver, "tracer-overhead")
	b.ReportMetric(emptyOver, "empty-overhead")
	b.ReportMetric(ratio, "overhead-ratio")
	b.ReportMetric(trWall, "tracer-wall-overhead")
	b.ReportMetric(float64(callsOn)/wallOn.Seconds(), "syscalls/s")
	b.ReportMetric(float64(lost.Events+lost.Tasks+lost.Counts+lost.Capped), "lost")
	b.ReportMetric(tracerNS, "prog-ns/run")
	b.ReportMetric(emptyNS, "empty-prog-ns/run")
	b.Logf("%s: %s %s, %d rounds of %d runs per mode; CPU of a round's median run (median over the rounds): nothing attached %s, empty program %s, tracer %s; "+
		"CPU overhead, median of the rounds' own ratios: tracer %+.1f%% (quartiles %+.1f%%, %+.1f%%), empty program %+.1f%% (quartiles %+.1f%%, %+.1f%%); "+
		"the same between the rounds' fastest runs: tracer %+.1f%%, empty %+.1f%%; wall overhead: tracer %+.1f%%, empty %+.1f%%; "+
		"%d syscalls/s; lost %+v; with BPF run-time statistics on, the sys_exit program took %.0f ns per run (the empty one %.0f ns); "+
		"waited %s for other programs on sys_exit to go; load average %s",
		wl.name, wl.mode, wl.n, rounds, repsPerMode, median(cpu[modeOff][:]), median(cpu[modeEmpty][:]), median(cpu[modeTracer][:]),
		trOver*100, trQ1*100, trQ3*100, emptyOver*100, emptyQ1*100, emptyQ3*100,
		trMin*100, emptyMin*100, trWall*100, emptyWall*100,
		int64(float64(callsOn)/wallOn.Seconds()), lost, tracerNS, emptyNS, waited, loadAvg())
	b.Logf("%s %s: tracer CPU overhead %+.1f%%, empty program's %+.1f%%, limit %.1fx that: %+.1f%%; ratio %.2f%s; load average %s",
		verdict, wl.name, trOver*100, emptyOver*100, limitRatio, limit*100, ratio, note, loadAvg())
}

// settle lets the machine settle before a timed run: attaching and detaching
// wait for RCU, and the benchmark's own garbage would otherwise be
// collected, on the other core, during a run.
func settle() {
	runtime.GC()
	time.Sleep(10 * time.Millisecond)
}

// attachments switches between the modes: nothing, the empty programs, or
// the tracer's own programs attached.
type attachments struct {
	b     *testing.B
	tr    *Tracer
	empty []*ebpf.Program
	links []link.Link
	mode  int
}

func (a *attachments) set(m int) {
	if a.mode == m {
		return
	}
	switch a.mode {
	case modeEmpty:
		for _, l := range a.links {
			l.Close()
		}
		a.links = nil
	case modeTracer:
		for _, l := range a.tr.links {
			l.Close()
		}
		a.tr.links = nil
	}
	a.mode = modeOff
	switch m {
	case modeEmpty:
		for _, p := range a.empty {
			l, err := link.AttachTracing(link.TracingOptions{Program: p})
			if err != nil {
				a.b.Fatalf("attaching an empty program: %v", err)
			}
			a.links = append(a.links, l)
		}
	case modeTracer:
		if err := a.tr.attach(); err != nil {
			a.b.Fatal(err)
		}
	}
	a.mode = m
}

// foreign reports whether a program other than the mode's own is on
// sys_exit, or may be: links that could not be listed (one going away
// answers EAGAIN for a moment) count as one.
func (a *attachments) foreign() bool {
	var ids []link.ID
	var err error
	for range 5 {
		if ids, err = sysExitLinks(); err == nil {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err != nil {
		a.b.Logf("%v: counted as another program on sys_exit", err)
		return true
	}
	own := 0
	if a.mode != modeOff {
		own = 1
	}
	return len(ids) > own
}

// maxForeignWait bounds how long a workload waits, in all, for other
// programs on sys_exit to go.
const maxForeignWait = 3 * time.Minute

// cleanRun makes one run after the settle, with no one else's program on
// sys_exit before or after it: a run that had one is made again once it is
// gone, while the workload's waiting (waited) stays within maxForeignWait;
// past that the run is returned as it is, and ok is false.
func cleanRun(b *testing.B, a *attachments, srv *server, waited *time.Duration) (s sample, ok bool) {
	for {
		settle()
		if !a.foreign() {
			s = srv.run(b)
			if !a.foreign() {
				return s, true
			}
		}
		if *waited >= maxForeignWait {
			return srv.run(b), false
		}
		time.Sleep(time.Second)
		*waited += time.Second
	}
}

// loadEmpty loads an empty program (return 0) for each of the tracer's
// tracepoints, of the tracer's own program type, in the same order.
func loadEmpty(b *testing.B) []*ebpf.Program {
	var progs []*ebpf.Program
	for _, tp := range tracepoints {
		p, err := ebpf.NewProgram(&ebpf.ProgramSpec{Name: "sc_empty", Type: ebpf.Tracing, AttachType: ebpf.AttachTraceRawTp,
			AttachTo: tp, License: "GPL", Instructions: asm.Instructions{asm.Mov.Imm(asm.R0, 0), asm.Return()}})
		if err != nil {
			b.Skipf("needs root and BPF: loading an empty program for %s: %v", tp, err)
		}
		b.Cleanup(func() { p.Close() })
		progs = append(progs, p)
	}
	return progs
}

// programCost runs the workload with the empty programs and with the
// tracer, three times each, with the kernel's BPF run-time statistics on
// (which add their own clock reads, so only these runs have them), and
// returns each sys_exit program's median nanoseconds per run.
func programCost(b *testing.B, a *attachments, srv *server) (emptyNS, tracerNS float64) {
	st, err := ebpf.EnableStats(uint32(unix.BPF_STATS_RUN_TIME))
	if err != nil {
		b.Fatalf("enabling BPF run-time statistics: %v", err)
	}
	defer st.Close()
	perRun := func(p *ebpf.Program) float64 {
		s0, err := p.Stats()
		if err != nil {
			b.Fatalf("reading BPF program statistics: %v", err)
		}
		srv.run(b)
		s1, err := p.Stats()
		if err != nil {
			b.Fatalf("reading BPF program statistics: %v", err)
		}
		if s1.RunCount == s0.RunCount {
			b.Fatal("the sys_exit program never ran")
		}
		return float64(s1.Runtime-s0.Runtime) / float64(s1.RunCount-s0.RunCount)
	}
	var e, t []float64
	for range 3 {
		a.set(modeEmpty)
		settle()
		e = append(e, perRun(a.empty[0]))
		a.set(modeTracer)
		settle()
		t = append(t, perRun(a.tr.objs.ScSysExit))
	}
	slices.Sort(e)
	slices.Sort(t)
	return e[1], t[1]
}

// server is a sysloop serve process: one run of its workload per request.
type server struct {
	in  io.WriteCloser
	out chan string
}

// startServer starts sysloop serve in the sandbox (or on the host) and
// waits until its workload is ready.
func startServer(b testing.TB, c *container, bin string, wl benchWorkload) *server {
	var cmd *exec.Cmd
	if wl.host {
		cmd = exec.Command(bin, "serve", wl.mode, wl.n)
	} else {
		cmd = exec.Command("docker", "exec", "-i", c.id, "/t/sysloop", "serve", wl.mode, wl.n)
	}
	in, err := cmd.StdinPipe()
	if err != nil {
		b.Fatal(err)
	}
	outPipe, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		b.Fatalf("starting sysloop serve: %v", err)
	}
	done := make(chan struct{})
	b.Cleanup(func() {
		in.Close()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			cmd.Process.Kill()
			<-done
		}
	})
	s := &server{in: in, out: make(chan string, 1)}
	go func() {
		defer close(done)
		sc := bufio.NewScanner(outPipe)
		for sc.Scan() {
			s.out <- sc.Text()
		}
		close(s.out)
		cmd.Wait()
	}()
	if line := s.next(b); line != "ready" {
		b.Fatalf("sysloop serve %s %s: %q instead of ready: %s", wl.mode, wl.n, line, stderr.String())
	}
	return s
}

// next is the server's next line of output, within a minute.
func (s *server) next(b testing.TB) string {
	select {
	case line, ok := <-s.out:
		if !ok {
			b.Fatal("sysloop serve ended")
		}
		return line
	case <-time.After(time.Minute):
		b.Fatal("sysloop serve did not answer within a minute")
	}
	return ""
}

// run runs the workload once.
func (s *server) run(b testing.TB) sample {
	if _, err := fmt.Fprintln(s.in, "go"); err != nil {
		b.Fatalf("asking sysloop serve for a run: %v", err)
	}
	line := s.next(b)
	f := strings.Fields(line)
	if len(f) != 3 {
		b.Fatalf("sysloop serve output %q: want wall and CPU nanoseconds and syscalls", line)
	}
	wall, err1 := strconv.ParseInt(f[0], 10, 64)
	cpu, err2 := strconv.ParseInt(f[1], 10, 64)
	calls, err3 := strconv.ParseInt(f[2], 10, 64)
	if err1 != nil || err2 != nil || err3 != nil || wall <= 0 || cpu <= 0 || calls <= 0 {
		b.Fatalf("sysloop serve output %q", line)
	}
	return sample{wall: time.Duration(wall), cpu: time.Duration(cpu), calls: calls}
}

// pairedOverhead is the median over the rounds of each round's ratio of a
// to base, less 1.
func pairedOverhead(a, base []time.Duration) float64 {
	r := ratios(a, base)
	return r[len(r)/2] - 1
}

// quartiles are the lower and upper quartiles of the rounds' ratios of a to
// base, less 1.
func quartiles(a, base []time.Duration) (q1, q3 float64) {
	r := ratios(a, base)
	return r[len(r)/4] - 1, r[len(r)*3/4] - 1
}

// ratios are each round's ratio of a to base, sorted.
func ratios(a, base []time.Duration) []float64 {
	var r []float64
	for i := range a {
		r = append(r, float64(a[i])/float64(base[i]))
	}
	slices.Sort(r)
	return r
}

// sysExitLinks are the links of every program on the sys_exit tracepoint
// (BTF or plain raw tracepoint alike), whoever attached them.
func sysExitLinks() ([]link.ID, error) {
	var it link.Iterator
	defer it.Close()
	var ids []link.ID
	for it.Next() {
		info, err := it.Link.Info()
		if err != nil {
			continue // gone meanwhile
		}
		if rt := info.RawTracepoint(); rt != nil && rt.Name == "sys_exit" {
			ids = append(ids, info.ID)
		}
	}
	if err := it.Err(); err != nil {
		return nil, fmt.Errorf("listing BPF links: %w", err)
	}
	return ids, nil
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

// sample is one workload run: wall time, the CPU time its thread used and
// the syscalls it made.
type sample struct {
	wall, cpu time.Duration
	calls     int64
}

// walls and cpus are the samples' wall and CPU times.
func walls(s []sample) []time.Duration {
	return durations(s, func(x sample) time.Duration { return x.wall })
}
func cpus(s []sample) []time.Duration {
	return durations(s, func(x sample) time.Duration { return x.cpu })
}

func durations(s []sample, of func(sample) time.Duration) []time.Duration {
	d := make([]time.Duration, len(s))
	for i, x := range s {
		d[i] = of(x)
	}
	return d
}

func median(d []time.Duration) time.Duration {
	d = slices.Clone(d)
	slices.Sort(d)
	return d[len(d)/2]
}
