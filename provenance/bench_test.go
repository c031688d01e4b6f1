package provenance

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"
)

// cpuTime is the CPU time (user and system) the process has used.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

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
	var worst, worstCPU time.Duration
	b.ResetTimer()
	for range b.N {
		start, cpu0 := time.Now(), cpuTime()
		sbom, err := GenerateSBOM(ctx, ref)
		d, c := time.Since(start), cpuTime()-cpu0
		if err != nil {
			b.Fatal(err)
		}
		if pk, err := ParseSBOM(sbom); err != nil || len(pk) == 0 {
			b.Fatalf("SBOM of the runner lists no package (%v)", err)
		}
		worst, worstCPU = max(worst, d), max(worstCPU, c)
	}
	b.StopTimer()
	b.ReportMetric(worst.Seconds(), "s/sbom-worst")
	b.ReportMetric(worstCPU.Seconds(), "cpu-s/sbom-worst")
	load, _ := os.ReadFile("/proc/loadavg")
	b.Logf("SBOM of the runner image: worst %.2fs wall, %.2fs CPU over %d (floor %s; load average %s)",
		worst.Seconds(), worstCPU.Seconds(), b.N, sbomFloor, strings.Join(strings.Fields(string(load))[:3], " "))
	if worst >= sbomFloor {
		b.Errorf("SBOM generation took %s, floor %s", worst, sbomFloor)
	}
}
