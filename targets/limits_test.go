package targets

import (
	"testing"
	"time"
)

func TestDeclaredLimits(t *testing.T) {
	tg, err := Load("../fixtures/targets/hardened.yaml")
	if err != nil {
		t.Fatal(err)
	}
	got := tg.DeclaredLimits()
	want := DeclaredLimits{CPUBudget: 3 * time.Second, CPUs: tg.Docker.CPUs, Pids: 64, Nofile: 1024, MemoryBytes: 128 << 20,
		ShmBytes: 8 << 20, TmpfsBytes: 32 << 20, TmpfsInodes: 4096, OutputFileBytes: 64 << 10}
	if got != want {
		t.Errorf("hardened reference:\n got %+v\nwant %+v", got, want)
	}
	osb := &Target{OpenSandbox: &OpenSandbox{Resources: &OpenSandboxResources{CPU: "1", Memory: "1Gi"}}}
	if got := osb.DeclaredLimits(); got != (DeclaredLimits{MemoryBytes: 1 << 30}) {
		t.Errorf("opensandbox: %+v", got)
	}
	if (&Target{}).DeclaredLimits() != (DeclaredLimits{}) {
		t.Error("a target without a runner section declares limits")
	}
}
