//go:build linux && amd64

package tracer

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
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
// sandbox, in three modes: with nothing attached, with an empty program
// (return 0) on each of the tracer's four BTF raw tracepoints, and with the
// tracer attached and watching the sandbox. The tracer is loaded and its
// watch opened before the first run; between runs only the attachments
// change, so no run carries the tracer's loading.
//
// The runs come in blocks of one run per mode, back to back, so a block's
// runs see the same machine: a shared machine's speed drifts by tens of
// percent over seconds (measured here: the same runs 7.1 ms in one round
// and 10.1 ms in a later one), more than the programs cost. The order
// within a block cycles through all six orders of the three modes, so each
// mode follows each other mode as often. After each switch of attachments
// one run is made and thrown away: the timed run finds the new programs
// already in the caches, as every run after the first does in real use.
// One placement of a program in memory runs faster or slower than another
// for reasons of its own, so the benchmark loads 24 copies of the empty
// programs and 24 of the tracer, each at a random place, and a block uses
// the next copy of each.
// A run's figure is the CPU time (user+system) of the workload's thread,
// read from its CPU clock: the cost added to the workload itself, without
// the wait for a core that the wall time also carries.
//
// A block's overhead for a mode is its run's CPU time over the block's run
// without anything attached, less 1. There are 11 rounds of 24 blocks; a
// round's figure is the median of its blocks', and a mode's overhead is the
// median of the 11 rounds' figures (quartiles printed beside it). The
// criterion, per workload: the tracer's overhead within 1.5 times the
// empty program's; a PASS or FAIL line says so, with a note when the empty
// program's overhead is not resolved above the noise (fewer than 3 rounds
// in 4 saw it cost anything), where the ratio means little. Before and
// after each run the benchmark checks that no one else's program is on
// sys_exit (another tracer, such as a sandcheck run's, makes the runs
// without ours pay for one) and makes a run that had one again once it is
// gone; when it waited 3 minutes in all, it goes on, and the line says
// INVALID instead. The tracer must also have counted every syscall the
// workload made while it was attached.
//
// BenchmarkTracerOverheadCalibration runs the same procedure with the
// tracer's place taken by 24 more copies of the empty program: two
// identical programs, whose ratio should come out 1. How far it does not
// is the procedure's own resolution, to read the tracer's figures by.
//
// Workloads (each run a few milliseconds): "tree" walks and reads a tree of
// 512 files twice as a search through a source tree does (opens, reads,
// directory listings); "io" copies /dev/zero to /dev/null 4 KiB at a time;
// "loop" calls getppid, the cheapest syscall, so the programs' share is the
// largest it can be; "host-io" is the io workload on the host, outside any
// sandbox, while the tracer watches the sandbox: what the tracer costs every
// other process of the machine. "abs-open" opens and closes one file by its
// absolute path, the one kind of call whose argument the tracer reads from
// the workload's memory on every call (the path's first 8 bytes, to match
// the sensitive prefixes): its line says INFO, the cost of that read, and
// is outside the criterion. Afterwards BPF run-time statistics give each
// sys_exit program's own nanoseconds per run (empty and tracer).
// `make bench-tracer` runs both once (-benchtime 1x).
func BenchmarkTracerOverhead(b *testing.B) {
	for _, wl := range benchWorkloads {
		b.Run(wl.name, func(b *testing.B) { benchOverhead(b, wl, false) })
	}
}

// BenchmarkTracerOverheadCalibration is BenchmarkTracerOverhead with a
// second empty program in the tracer's place.
func BenchmarkTracerOverheadCalibration(b *testing.B) {
	for _, wl := range benchWorkloads {
		b.Run(wl.name, func(b *testing.B) { benchOverhead(b, wl, true) })
	}
}

// benchWorkload is one workload of BenchmarkTracerOverhead: sysloop's mode
// and argument, whether it runs on the host instead of in the sandbox, and
// whether it only informs (an INFO line, outside the criterion).
type benchWorkload struct {
	name, mode, n string
	host, info    bool
}

var benchWorkloads = []benchWorkload{
	{name: "tree", mode: "tree", n: "2"},
	{name: "io", mode: "io", n: "10000"},
	{name: "loop", mode: "loop", n: "50000"},
	{name: "host-io", mode: "io", n: "10000", host: true},
	{name: "abs-open", mode: "absopen", n: "5000", info: true},
}

const (
	// rounds is how many rounds each workload runs; blocksPerRound is how
	// many blocks (a run of each mode) a round has.
	rounds         = 11
	blocksPerRound = 24
	// limitRatio is the criterion: the tracer's overhead within this
	// multiple of the empty program's.
	limitRatio = 1.5
	// placements is how many copies of the empty programs and of the
	// tracer are loaded; a block uses the next copy of each.
	placements = 24
)

// The modes a run is made in.
const (
	modeOff = iota
	modeEmpty
	modeTracer
	nModes
)

// blockOrders are the six orders of the three modes, which the blocks take
// in turn.
var blockOrders = [6][nModes]int{{0, 1, 2}, {1, 2, 0}, {2, 0, 1}, {0, 2, 1}, {2, 1, 0}, {1, 0, 2}}

func benchOverhead(b *testing.B, wl benchWorkload, calibrate bool) {
	bin := buildSysloop(b)
	c := startContainer(b, "runc", bin)
	srv := startServer(b, c, bin, wl)
	srv.run(b) // warm up
	att := &attachments{b: b}
	defer att.set(modeOff, 0)
	var watches []*Watch
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 0))
	for range placements {
		loadPad(b, rng)
		att.empties = append(att.empties, loadEmpty(b))
		loadPad(b, rng)
		if calibrate {
			att.others = append(att.others, loadEmpty(b))
			continue
		}
		tr, err := New(Options{})
		if errors.Is(err, ErrUnavailable) {
			b.Skipf("needs root and BPF: %v", err)
		} else if err != nil {
			b.Fatal(err)
		}
		defer tr.Close()
		// New attaches; the benchmark attaches one copy at a time.
		for _, l := range tr.links {
			l.Close()
		}
		tr.links = nil
		w, err := tr.Watch(c.pid(b), WatchOptions{})
		if err != nil {
			b.Fatal(err)
		}
		att.trs = append(att.trs, tr)
		watches = append(watches, w)
	}

	// over[m][r] are round r's blocks' overheads in mode m; runs[m] are
	// every run in mode m.
	var over [nModes][rounds][]float64
	var runs [nModes][]sample
	var callsOn int64
	var wallOn time.Duration
	foreign := 0 // runs made while another program was on sys_exit
	var waited time.Duration
	for r := range rounds * b.N {
		for k := range blocksPerRound {
			j := r*blocksPerRound + k
			var block [nModes]sample
			for _, m := range blockOrders[j%len(blockOrders)] {
				att.set(m, j%placements)
				srv.run(b) // after the switch: thrown away
				s, ok := cleanRun(b, att, srv, &waited)
				if !ok {
					foreign++
				}
				block[m] = s
				runs[m] = append(runs[m], s)
				if m == modeTracer {
					callsOn += s.calls
					wallOn += s.wall
				}
			}
			for m := range nModes {
				over[m][r%rounds] = append(over[m][r%rounds], float64(block[m].cpu)/float64(block[modeOff].cpu)-1)
			}
		}
	}
	var emptyNS, tracerNS float64
	if !calibrate {
		emptyNS, tracerNS = programCost(b, att, srv)
	}
	att.set(modeOff, 0)
	var counted uint64
	var lost Lost
	for _, w := range watches {
		rep, err := w.Close()
		if err != nil {
			b.Fatal(err)
		}
		lost = lost.add(rep.Lost)
		for _, t := range rep.Trees {
			if slices.Equal(t.Argv, []string{"/t/sysloop", "serve", wl.mode, wl.n}) {
				for _, cnt := range t.Syscalls {
					counted += cnt.Calls
				}
			}
		}
	}
	if !wl.host && !calibrate && counted < uint64(callsOn) {
		b.Errorf("%s: the tracer counted %d syscalls of the workload, fewer than the %d it made while the tracer was attached",
			wl.name, counted, callsOn)
	}

	// A round's figure is the median of its blocks'.
	var byRound [nModes][]float64
	for m := range nModes {
		for r := range rounds {
			byRound[m] = append(byRound[m], medianOf(over[m][r]))
		}
	}
	trOver, emptyOver := medianOf(byRound[modeTracer]), medianOf(byRound[modeEmpty])
	emptyQ1, emptyQ3 := quartilesOf(byRound[modeEmpty])
	trQ1, trQ3 := quartilesOf(byRound[modeTracer])
	resolved := emptyQ1 > 0
	limit := limitRatio * emptyOver
	verdict := "PASS"
	if trOver > limit {
		verdict = "FAIL"
	}
	if wl.info {
		verdict = "INFO"
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
	// other names what took the tracer's place.
	other, detail := "tracer", fmt.Sprintf("%d syscalls/s; lost %+v; with BPF run-time statistics on, the sys_exit program took %.0f ns per run (the empty one %.0f ns); waited %s for other programs on sys_exit to go; ",
		int64(float64(callsOn)/wallOn.Seconds()), lost, tracerNS, emptyNS, waited)
	if calibrate {
		other, detail = "second copy", ""
		b.ReportMetric(trOver, "second-empty-overhead")
	} else {
		b.ReportMetric(trOver, "tracer-overhead")
		b.ReportMetric(float64(callsOn)/wallOn.Seconds(), "syscalls/s")
		b.ReportMetric(float64(lost.Events+lost.Tasks+lost.Counts+lost.Capped), "lost")
		b.ReportMetric(tracerNS, "prog-ns/run")
		b.ReportMetric(emptyNS, "empty-prog-ns/run")
	}
	b.ReportMetric(emptyOver, "empty-overhead")
	b.ReportMetric(ratio, "overhead-ratio")
	b.Logf("%s: %s %s, %d rounds of %d blocks; CPU of the median run: nothing attached %s, empty program %s, %s %s; "+
		"CPU overhead, median of the rounds' medians: %s %+.1f%% (quartiles %+.1f%%, %+.1f%%), empty program %+.1f%% (quartiles %+.1f%%, %+.1f%%); %sload average %s",
		wl.name, wl.mode, wl.n, rounds, blocksPerRound, median(cpus(runs[modeOff])), median(cpus(runs[modeEmpty])), other, median(cpus(runs[modeTracer])),
		other, trOver*100, trQ1*100, trQ3*100, emptyOver*100, emptyQ1*100, emptyQ3*100, detail, loadAvg())
	if calibrate {
		b.Logf("CALIBRATION %s: two identical empty programs measured %+.1f%% and %+.1f%%: ratio %.2f (1 is exact)%s",
			wl.name, trOver*100, emptyOver*100, ratio, note)
		return
	}
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

// attachments switches between the modes (nothing, an empty program on
// each tracepoint, or the tracer's programs, or in calibration a second
// empty program) and between the copies of each that the benchmark loaded.
type attachments struct {
	b       *testing.B
	trs     []*Tracer
	empties [][]*ebpf.Program
	others  [][]*ebpf.Program // calibration: the tracer's place
	links   []link.Link       // the attached empty programs'
	mode    int
	inst    int
}

func (a *attachments) set(m, inst int) {
	if a.mode == m && a.inst == inst {
		return
	}
	switch {
	case a.mode == modeEmpty || a.mode == modeTracer && a.others != nil:
		for _, l := range a.links {
			l.Close()
		}
		a.links = nil
	case a.mode == modeTracer:
		tr := a.trs[a.inst]
		for _, l := range tr.links {
			l.Close()
		}
		tr.links = nil
	}
	a.mode = modeOff
	switch {
	case m == modeEmpty:
		a.attachEmpty(a.empties[inst])
	case m == modeTracer && a.others != nil:
		a.attachEmpty(a.others[inst])
	case m == modeTracer:
		if err := a.trs[inst].attach(); err != nil {
			a.b.Fatal(err)
		}
	}
	a.mode, a.inst = m, inst
}

func (a *attachments) attachEmpty(progs []*ebpf.Program) {
	for _, p := range progs {
		l, err := link.AttachTracing(link.TracingOptions{Program: p})
		if err != nil {
			a.b.Fatalf("attaching an empty program: %v", err)
		}
		a.links = append(a.links, l)
	}
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

// loadPad loads a program of random length that stays loaded until the
// benchmark ends, and so moves the next program loaded to a random place in
// the kernel's memory for programs: where each copy lands is left to
// chance, not to the order of loading.
func loadPad(b *testing.B, rng *rand.Rand) {
	insns := asm.Instructions{}
	for range rng.IntN(512) {
		insns = append(insns, asm.Mov.Imm(asm.R0, 0))
	}
	insns = append(insns, asm.Mov.Imm(asm.R0, 0), asm.Return())
	p, err := ebpf.NewProgram(&ebpf.ProgramSpec{Name: "sc_pad", Type: ebpf.SocketFilter, License: "GPL", Instructions: insns})
	if err != nil {
		b.Fatalf("loading a padding program: %v", err)
	}
	b.Cleanup(func() { p.Close() })
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
		for inst := range placements {
			a.set(modeEmpty, inst)
			settle()
			e = append(e, perRun(a.empties[inst][0]))
			a.set(modeTracer, inst)
			settle()
			t = append(t, perRun(a.trs[inst].objs.ScSysExit))
		}
	}
	slices.Sort(e)
	slices.Sort(t)
	return e[len(e)/2], t[len(t)/2]
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

// medianOf is the median of x.
func medianOf(x []float64) float64 {
	x = slices.Clone(x)
	slices.Sort(x)
	return x[len(x)/2]
}

// quartilesOf are the lower and upper quartiles of x.
func quartilesOf(x []float64) (q1, q3 float64) {
	x = slices.Clone(x)
	slices.Sort(x)
	return x[len(x)/4], x[len(x)*3/4]
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

// cpus are the samples' CPU times.
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
