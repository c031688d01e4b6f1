package process

import (
	_ "embed"

	"github.com/sandcheck/sandcheck/targets"
)

// schema is the section's JSON Schema fragment, part of
// policies/schema/target.schema.json (its test checks the two agree).
//
//go:embed schema.json
var schema []byte

// Config is how the process runner, the unsandboxed control, runs the
// probe: a plain host process as the host's root, inside a cgroup with
// limits (so a fork or memory bomb stays bounded) and, with network
// harness, inside a network namespace on the harness bridge (so its
// traffic stays on harness addresses). Nothing else separates it from the
// host.
//
//sandcheck:section process Process
type Config struct {
	// Limits are enforced through a cgroup the runner makes per sandbox.
	Limits targets.Limits `yaml:"limits,omitempty"`
	// Network is "harness" (a network namespace the runner makes on the
	// harness bridge) or "none" (an empty network namespace).
	Network string `yaml:"network"`
	// Env is added to the process's environment (which starts empty).
	Env map[string]string `yaml:"env,omitempty"`
}

var _ targets.Section = (*Config)(nil)

// Decode is the process runner's targets.SectionDecoder: the one place
// its section is checked.
func Decode(src *targets.SectionSource) (targets.Section, error) {
	var c Config
	if err := src.Decode(&c); err != nil {
		return nil, err
	}
	src.CheckLimits("limits", c.Limits)
	switch c.Network {
	case "none", "harness":
	case "":
		src.Add("network", "is required: none or harness (the host's own network is never used)")
	default:
		src.Add("network", "%q is not one of [none harness]", c.Network)
	}
	src.CheckEnv("env", c.Env)
	return &c, nil
}

// Declared: the process declares no limit the limit probes run past (its
// cgroup limits bound the bombs, they are not a platform's promise), no
// egress profile and no identity; its environment is handed over as
// written.
func (c *Config) Declared() targets.Declared { return targets.Declared{} }
