package targets

import "time"

// CPUBudget is the declared CPU time budget of one task (0: none).
func (d *Docker) CPUBudget() time.Duration {
	if d == nil || d.CPUTime == "" {
		return 0
	}
	b, err := time.ParseDuration(d.CPUTime)
	if err != nil {
		return 0
	}
	return b
}

func (v *validator) checkCPUTime(d *Docker) {
	if d.CPUTime == "" {
		return
	}
	if b, err := time.ParseDuration(d.CPUTime); err != nil || b < 100*time.Millisecond || b > time.Hour {
		v.add("$.docker.cpu_time", "must be a duration from 100ms to 1h such as 2s (got %q)", d.CPUTime)
	}
}
