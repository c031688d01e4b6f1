package e2e

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sandcheck/sandcheck/evidence"
)

// benchRounds is how many runs of each reference the median is taken over.
const benchRounds = 5

// BenchmarkHardenedRun runs the default probe set against each hardened
// reference through the CLI (default --parallel) benchRounds times and
// prints the median wall time beside its floor (issue 11: runc ≤ 8 s,
// gVisor ≤ 15 s on the 2-core reference machine), plus sandbox start
// seconds and seconds per probe (`make bench`). A median over its floor
// fails the benchmark.
func BenchmarkHardenedRun(b *testing.B) {
	for _, tc := range []struct {
		target string
		floor  float64
	}{{"hardened.yaml", 8}, {"hardened-gvisor.yaml", 15}} {
		b.Run(tc.target, func(b *testing.B) {
			if os.Geteuid() != 0 {
				b.Skip("needs root and a Docker engine")
			}
			bin := os.Getenv("SANDCHECK_BIN")
			if bin == "" {
				bin, _ = filepath.Abs("../bin")
			}
			var walls, loads []float64
			var failed []string
			var start, probe, n float64
			for range benchRounds {
				// The machine is shared: each figure goes with the load it
				// was measured under (1-minute average as the run begins).
				loads = append(loads, loadAverage())
				out := b.TempDir()
				cmd := exec.Command(filepath.Join(bin, "sandcheck"), "run", "--target", "fixtures/targets/"+tc.target, "--out-dir", out, "--quiet")
				cmd.Dir = ".."
				t0 := time.Now()
				outb, err := cmd.CombinedOutput()
				walls = append(walls, time.Since(t0).Seconds())
				var exit *exec.ExitError
				switch {
				case errors.As(err, &exit) && exit.ExitCode() == 1:
					// A verdict that fails is a finding, not a harness
					// error: the run's time still counts, and the bench
					// fails at the end with what failed.
					failed = append(failed, fmt.Sprintf("run %d (load %.1f): verdict failed\n%s", len(walls), loads[len(loads)-1], lastLines(string(outb), 6)))
				case err != nil:
					b.Fatalf("run failed: %v\n%s", err, outb)
				}
				raw, err := os.ReadFile(filepath.Join(out, "run.json"))
				if err != nil {
					b.Fatal(err)
				}
				var rec evidence.Record
				if err := json.Unmarshal(raw, &rec); err != nil {
					b.Fatal(err)
				}
				start += rec.Timing.SandboxStartSeconds
				probe += rec.Timing.ProbeSeconds
				n += float64(len(rec.Results))
			}
			slices.Sort(walls)
			median := walls[len(walls)/2]
			R := float64(benchRounds)
			b.ReportMetric(median, "median-wall-s")
			b.ReportMetric(start/R, "sandbox-start-s/run")
			b.ReportMetric(probe/n, "s/probe")
			b.ReportMetric(n/R, "probes/run")
			verdict := "floor met"
			if median > tc.floor {
				verdict = "FLOOR MISSED"
			}
			fmt.Printf("bench %s: median wall %.1f s of %d runs (floor %.0f s: %s); runs %v s at load averages %v on %d CPUs; %d run(s) failed their verdict\n",
				tc.target, median, benchRounds, tc.floor, verdict, rounded(walls), rounded(loads), runtime.NumCPU(), len(failed))
			if median > tc.floor {
				b.Errorf("%s: median wall %.1f s is over the floor of %.0f s", tc.target, median, tc.floor)
			}
			for _, f := range failed {
				b.Errorf("%s: %s", tc.target, f)
			}
		})
	}
}

// loadAverage is the machine's 1-minute load average (0 when unreadable).
func loadAverage() float64 {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return 0
	}
	var l float64
	if _, err := fmt.Sscanf(string(b), "%f", &l); err != nil {
		return 0
	}
	return l
}

// lastLines is the last n lines of s.
func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

func rounded(xs []float64) []string {
	out := make([]string, len(xs))
	for i, x := range xs {
		out[i] = fmt.Sprintf("%.1f", x)
	}
	return out
}
