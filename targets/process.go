package targets

// Process is how the process runner, the unsandboxed control, runs the
// probe: a plain host process as the host's root, inside a cgroup with
// limits (so a fork or memory bomb stays bounded) and, with network
// harness, inside a network namespace on the harness bridge (so its
// traffic stays on harness addresses). Nothing else separates it from the
// host.
type Process struct {
	// Limits are enforced through a cgroup the runner makes per sandbox.
	Limits Limits `yaml:"limits,omitempty"`
	// Network is "harness" (a network namespace the runner makes on the
	// harness bridge) or "none" (an empty network namespace).
	Network string `yaml:"network"`
	// Env is added to the process's environment (which starts empty).
	Env map[string]string `yaml:"env,omitempty"`
}

func (v *validator) checkProcess(p *Process) {
	v.checkLimits("$.process.limits", p.Limits)
	switch p.Network {
	case "none", "harness":
	case "":
		v.add("$.process.network", "is required: none or harness (the host's own network is never used)")
	default:
		v.add("$.process.network", "%q is not one of [none harness]", p.Network)
	}
	v.checkEnv("$.process.env", p.Env)
}
