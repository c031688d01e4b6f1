package provenance

import (
	"context"
	"os/exec"
	"testing"
	"time"
)

// sbomFloor is the bound on cataloging the runner image (issue 14).
const sbomFloor = 10 * time.Second

// BenchmarkSBOMRunner times syft's SBOM of the first-party runner image as
// a loopback registry serves it (the image pushed from the Docker engine
// once, outside the timing). It fails when one SBOM takes 10 s or more.
func BenchmarkSBOMRunner(b *testing.B) {
	if err := exec.Command("docker", "image", "inspect", "sandcheck/runner:dev").Run(); err != nil {
		b.Skip("sandcheck/runner:dev is not built (make images)")
	}
	reg, err := ServeRegistry("127.0.0.1:0", nil)
	if err != nil {
		b.Fatal(err)
	}
	defer reg.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	ref, err := PushLocal(ctx, "sandcheck/runner:dev", reg.Addr+"/sandcheck/runner:bench")
	if err != nil {
		b.Fatal(err)
	}
	var worst time.Duration
	b.ResetTimer()
	for range b.N {
		start := time.Now()
		sbom, err := GenerateSBOM(ctx, ref)
		d := time.Since(start)
		if err != nil {
			b.Fatal(err)
		}
		if pk, err := ParseSBOM(sbom); err != nil || len(pk) == 0 {
			b.Fatalf("SBOM of the runner lists no package (%v)", err)
		}
		worst = max(worst, d)
	}
	b.StopTimer()
	b.ReportMetric(worst.Seconds(), "s/sbom-worst")
	b.Logf("SBOM of the runner image: worst %.2fs over %d (floor %s)", worst.Seconds(), b.N, sbomFloor)
	if worst >= sbomFloor {
		b.Errorf("SBOM generation took %s, floor %s", worst, sbomFloor)
	}
}
