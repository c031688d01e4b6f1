package e2e

import (
	"context"
	"fmt"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	fixture "github.com/sandcheck/sandcheck/fixtures/opensandbox"
	"github.com/sandcheck/sandcheck/runners"
	osb "github.com/sandcheck/sandcheck/runners/opensandbox"
	"github.com/sandcheck/sandcheck/targets"
)

// BenchmarkOpenSandboxStart starts benchRounds sandboxes one after another
// through the opensandbox runner (create 202, polling until Running,
// endpoint lookup, probe upload) against the fixture server with the real
// execd, runc and runsc, and prints the median start time (`make bench`).
func BenchmarkOpenSandboxStart(b *testing.B) {
	for _, runtime := range []string{"runc", "runsc"} {
		b.Run(runtime, func(b *testing.B) {
			if os.Geteuid() != 0 {
				b.Skip("needs root and a Docker engine")
			}
			bin := os.Getenv("SANDCHECK_BIN")
			if bin == "" {
				bin, _ = filepath.Abs("../bin")
			}
			cfg := fixture.Config{Execd: osbExecd}
			if runtime == "runsc" {
				cfg.Runtime = "runsc"
			}
			srv, err := fixture.New(context.Background(), cfg)
			if err != nil {
				b.Fatal(err)
			}
			hs := httptest.NewServer(srv.Handler())
			defer func() {
				hs.Close()
				ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
				defer cancel()
				if err := srv.Close(ctx); err != nil {
					b.Error(err)
				}
			}()
			r, err := osb.New(targets.OpenSandbox{URL: hs.URL + "/v1", PollInterval: "100ms"}, "sandcheck/runner:dev", "", nil)
			if err != nil {
				b.Fatal(err)
			}
			var starts []float64
			for i := range benchRounds {
				t0 := time.Now()
				sb, err := r.Start(context.Background(), runners.SandboxSpec{Name: fmt.Sprintf("bench-%d", i), ProbeDir: bin, StartTimeout: time.Minute})
				if err != nil {
					b.Fatal(err)
				}
				starts = append(starts, time.Since(t0).Seconds())
				if err := sb.Close(context.Background()); err != nil {
					b.Fatal(err)
				}
			}
			slices.Sort(starts)
			med := starts[len(starts)/2]
			b.ReportMetric(med, "start-s")
			fmt.Printf("opensandbox %s: median sandbox start %.2fs over %d starts (min %.2fs, max %.2fs)\n", runtime, med, len(starts), starts[0], starts[len(starts)-1])
		})
	}
}
