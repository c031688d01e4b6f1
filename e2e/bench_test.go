package e2e

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/sandcheck/sandcheck/evidence"
)

// BenchmarkHardenedRun runs the default probe set against the hardened
// reference through the CLI and reports wall seconds, sandbox start seconds
// and seconds per probe (`make bench`).
func BenchmarkHardenedRun(b *testing.B) {
	for _, target := range []string{"hardened.yaml", "hardened-gvisor.yaml"} {
		b.Run(target, func(b *testing.B) {
			if os.Geteuid() != 0 {
				b.Skip("needs root and a Docker engine")
			}
			bin := os.Getenv("SANDCHECK_BIN")
			if bin == "" {
				bin, _ = filepath.Abs("../bin")
			}
			var wall, start, probe, n float64
			for i := 0; i < b.N; i++ {
				out := b.TempDir()
				cmd := exec.Command(filepath.Join(bin, "sandcheck"), "run", "--target", "fixtures/targets/"+target, "--out", out, "--quiet")
				cmd.Dir = ".."
				t0 := time.Now()
				if outb, err := cmd.CombinedOutput(); err != nil {
					b.Fatalf("run failed: %v\n%s", err, outb)
				}
				wall += time.Since(t0).Seconds()
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
			N := float64(b.N)
			b.ReportMetric(wall/N, "wall-s/run")
			b.ReportMetric(start/N, "sandbox-start-s/run")
			b.ReportMetric(probe/n, "s/probe")
			b.ReportMetric(n/N, "probes/run")
		})
	}
}
