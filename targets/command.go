package targets

import (
	"errors"
	"fmt"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"time"
)

// Command is how the command runner drives a platform through its own
// command-line tool: each step is an argv array (never a shell string)
// whose ${VAR} words the runner fills per call. A word that is exactly
// ${ARGV} or ${ENV_ARGS} expands to several words.
type Command struct {
	// Create makes and starts one sandbox and prints its ID as the last
	// non-empty line of its standard output. Variables: ${NAME} (unique in
	// the run), ${IMAGE}, ${NETWORK} (the harness network's name with
	// network harness, else empty), ${DNS} (the harness's resolver),
	// ${HOSTNAME}, ${ENV_ARGS}, ${TARGET_DIR} (the target file's folder,
	// for files it names such as a seccomp profile).
	Create []string `yaml:"create"`
	// Exec runs a command in a sandbox and exits with its exit code.
	// Variables: ${ID}, ${ARGV} (the command's words) or ${ARGV_SHELL} (the
	// command as one POSIX-shell-quoted string, for tools that take a
	// shell line), ${ENV_ARGS}.
	Exec []string `yaml:"exec"`
	// CopyIn copies one host file into a sandbox. Variables: ${ID}, ${SRC}
	// (the host file), ${DST} (the path inside; its folder is
	// /.sandcheck, which Create must make writable for the copy, e.g. a
	// volume).
	CopyIn []string `yaml:"copy_in"`
	// Destroy removes a sandbox and everything it holds; it must succeed
	// for a sandbox that is already gone. Variables: ${ID}.
	Destroy []string `yaml:"destroy"`
	// DestroyByName removes what a failed create may have left under the
	// sandbox's name, when create printed no ID (e.g. docker run made the
	// container but could not start it); optional, but without it such a
	// sandbox is left behind. Variables: ${NAME}.
	DestroyByName []string `yaml:"destroy_by_name,omitempty"`
	// Spawn starts a command in a sandbox as a given user without waiting
	// for it (the platform's own agent process beside the task, which
	// secrets.proc-environ looks for) and returns once it runs; optional
	// (without it that probe cannot run). Variables: ${ID}, ${USER}
	// ("uid"), ${ARGV} or ${ARGV_SHELL}, ${ENV_ARGS}.
	Spawn []string `yaml:"spawn,omitempty"`
	// List prints the IDs of the platform's live sandboxes, one a line
	// (optional; after each destroy the runner checks the sandbox is no
	// longer listed, and one still listed is a teardown leftover). No
	// variables.
	List []string `yaml:"list,omitempty"`
	// EnvArg is repeated once per environment variable where a step has
	// ${ENV_ARGS}, with ${KEY} and ${VALUE} filled (e.g. ["-e",
	// "${KEY}=${VALUE}"]); required when a step names ${ENV_ARGS}.
	EnvArg []string `yaml:"env_arg,omitempty"`
	// Network is "none" (the sandbox reaches no harness canary: network
	// probes are not tested) or "harness" (Create puts the sandbox on the
	// harness network named ${NETWORK}, where the canaries are; only for
	// a platform on this machine that can join a Docker network).
	Network string `yaml:"network"`
	// Egress is the egress profile the platform promises (see
	// EgressProfiles); on the harness network the harness enforces it.
	// Empty means none on network none and open on the harness network.
	Egress string `yaml:"egress,omitempty"`
	// Env is added to every sandbox's environment through ${ENV_ARGS};
	// "${SANDCHECK_SCOPED_KEY}" in a value is the run's honey scoped key.
	Env map[string]string `yaml:"env,omitempty"`
	// Timeout bounds each create, copy and destroy call, e.g. 2m (default
	// 2m); an exec is bounded by its probe's own timeout.
	Timeout string `yaml:"timeout,omitempty"`
}

// The variables each command step may name.
var commandVars = map[string][]string{
	"create":          {"TARGET_DIR", "NAME", "IMAGE", "NETWORK", "DNS", "HOSTNAME", "ENV_ARGS"},
	"exec":            {"ID", "ARGV", "ARGV_SHELL", "ENV_ARGS"},
	"copy_in":         {"ID", "SRC", "DST"},
	"destroy":         {"ID"},
	"destroy_by_name": {"NAME"},
	"spawn":           {"ID", "USER", "ARGV", "ARGV_SHELL", "ENV_ARGS"},
	"list":            {},
	"env_arg":         {"KEY", "VALUE"},
}

// splatVars are the variables that expand to several words and must be a
// word of their own.
var splatVars = []string{"ARGV", "ENV_ARGS"}

var commandVar = regexp.MustCompile(`\$\{([^}]*)\}`)

// CommandTimeout is the bound of one create, copy or destroy call.
func (c *Command) CommandTimeout() time.Duration {
	if c == nil || c.Timeout == "" {
		return 2 * time.Minute
	}
	d, err := time.ParseDuration(c.Timeout)
	if err != nil {
		return 2 * time.Minute
	}
	return d
}

func (v *validator) checkCommand(c *Command) {
	steps := []struct {
		name string
		argv []string
		req  bool
	}{{"create", c.Create, true}, {"exec", c.Exec, true}, {"copy_in", c.CopyIn, true},
		{"destroy", c.Destroy, true}, {"destroy_by_name", c.DestroyByName, false}, {"spawn", c.Spawn, false}, {"list", c.List, false}, {"env_arg", c.EnvArg, false}}
	usesEnv := false
	for _, s := range steps {
		path := "$.command." + s.name
		if len(s.argv) == 0 {
			if s.req {
				v.add(path, "is required: an argv array such as [docker, ...]")
			}
			continue
		}
		if strings.TrimSpace(s.argv[0]) == "" || strings.Contains(s.argv[0], "${") {
			v.add(path+"[0]", "must name the program to run, without variables (got %q)", s.argv[0])
		}
		for i, w := range s.argv {
			for _, m := range commandVar.FindAllStringSubmatch(w, -1) {
				name := m[1]
				if !slices.Contains(commandVars[s.name], name) {
					v.add(fmt.Sprintf("%s[%d]", path, i), "${%s} is not a variable of this step (known: %v)", name, commandVars[s.name])
					continue
				}
				if slices.Contains(splatVars, name) && w != "${"+name+"}" {
					v.add(fmt.Sprintf("%s[%d]", path, i), "${%s} expands to several words and must be a word of its own (got %q)", name, w)
				}
				if name == "ENV_ARGS" {
					usesEnv = true
				}
			}
		}
	}
	if len(c.Exec) > 0 && !slices.ContainsFunc(c.Exec, func(w string) bool {
		return w == "${ARGV}" || strings.Contains(w, "${ARGV_SHELL}")
	}) {
		v.add("$.command.exec", "must pass the command through ${ARGV} or ${ARGV_SHELL}")
	}
	if usesEnv && len(c.EnvArg) == 0 {
		v.add("$.command.env_arg", "is required when a step names ${ENV_ARGS}")
	}
	switch c.Network {
	case "none", "harness":
	case "":
		v.add("$.command.network", "is required: none or harness")
	default:
		v.add("$.command.network", "%q is not one of [none harness]", c.Network)
	}
	if c.Timeout != "" {
		if d, err := time.ParseDuration(c.Timeout); err != nil || d < time.Second || d > 30*time.Minute {
			v.add("$.command.timeout", "must be a duration from 1s to 30m such as 2m (got %q)", c.Timeout)
		}
	}
	if c.Egress != "" && !slices.Contains(EgressProfiles, c.Egress) {
		v.add("$.command.egress", "%q is not one of %v", c.Egress, EgressProfiles)
	}
	v.checkEnv("$.command.env", c.Env)
}

// CheckPrograms looks up the program of every command step the way the
// command runner will start it (exec.LookPath: a bare name on PATH, a path
// with a slash as it stands), so a target naming a program this machine
// does not have is refused before anything runs, with file, line, field and
// program. It checks the host, so Load does not make it; `targets
// validate` and the runner do. A target without a command section passes.
func (t *Target) CheckPrograms() error {
	if t.Command == nil {
		return nil
	}
	c := t.Command
	v := validator{name: t.Path, src: t.src}
	for _, s := range []struct {
		name string
		argv []string
	}{{"create", c.Create}, {"exec", c.Exec}, {"copy_in", c.CopyIn}, {"destroy", c.Destroy},
		{"destroy_by_name", c.DestroyByName}, {"spawn", c.Spawn}, {"list", c.List}} {
		if len(s.argv) == 0 {
			continue
		}
		if _, err := exec.LookPath(s.argv[0]); err != nil {
			v.add("$.command."+s.name+"[0]", "program %q cannot be run here: %v", s.argv[0], unwrapExec(err))
		}
	}
	if len(v.errs) > 0 {
		return fmt.Errorf("%w: %w", ErrInvalid, v.errs)
	}
	return nil
}

// unwrapExec drops exec.Error's repetition of the program's name.
func unwrapExec(err error) error {
	var ee *exec.Error
	if errors.As(err, &ee) {
		return ee.Err
	}
	return err
}

// EgressProfile is the declared egress profile, or none without the
// harness network and open on it.
func (c *Command) EgressProfile() string {
	switch {
	case c.Egress != "":
		return c.Egress
	case c.Network == "harness":
		return EgressOpen
	}
	return EgressNone
}
