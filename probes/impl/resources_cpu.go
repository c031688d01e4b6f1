package impl

import "github.com/sandcheck/sandcheck/probes"

// resources.cpu-deadline (cpuDeadline, res_limits.go) is registered here, on
// its own: its control is not RLIMIT_CPU (runsc ignores it for the
// workload) but the target's per-task CPU budget, which the harness enforces
// from outside through the sandbox cgroup's CPU accounting and reports as
// host evidence (suites/cpubudget.go).
func init() {
	register(map[string]Func{"resources.cpu-deadline": cpuDeadline})
}

// bounds are the limit probes' bounds the harness set (zero fields: each
// probe's default).
func bounds(p probes.Params) probes.Bounds {
	if p.Bounds == nil {
		return probes.Bounds{}
	}
	return *p.Bounds
}
