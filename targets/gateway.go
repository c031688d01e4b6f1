package targets

import (
	"net/url"
	"regexp"
	"slices"
	"time"
)

// Gateway is how the gateway runner drives the agent-runtime API of the
// product documents: spawn an instance (POST /v1/runtime/agents with a
// runtime profile and a substrate), run shell tasks in it (POST
// .../tasks), destroy it (DELETE ...?force=true), all with a Bearer admin
// key read from the environment.
type Gateway struct {
	// URL is the gateway's base URL (scheme, host, port; no path), e.g.
	// http://127.0.0.1:8470.
	URL string `yaml:"url"`
	// AdminKeyEnv names the environment variable holding the admin key; the
	// key itself is never written in a target file, a log or a report.
	AdminKeyEnv string `yaml:"admin_key_env"`
	// RuntimeProfile is the instance's runtime profile: session or pooled
	// (ephemeral-task kills the box after one task, and the runner copies
	// the probe in through tasks first).
	RuntimeProfile string `yaml:"runtime_profile"`
	// Substrate is the compute isolation asked for (default opensandbox;
	// the runner checks GET /v1/runtime/substrates offers it).
	Substrate string `yaml:"substrate,omitempty"`
	// AgentType is the spawn request's agent_type (default chat).
	AgentType string `yaml:"agent_type,omitempty"`
	// Capability is the task request's capability (default chat).
	Capability string `yaml:"capability,omitempty"`
	// TaskResponse maps the task call's response body, which the document
	// does not describe, to what the runner needs; required (the runner
	// never guesses).
	TaskResponse *TaskResponse `yaml:"task_response"`
	// Timeout bounds each API call, e.g. 30s (default 30s).
	Timeout string `yaml:"timeout,omitempty"`
	// Host is the host side of the deployment (the gateway runs on this
	// machine's Docker), for the document's host-side proof; nil: no host
	// view, the host-side checks are not made.
	Host *GatewayHost `yaml:"host,omitempty"`
}

// TaskResponse names the top-level JSON fields of the task response.
type TaskResponse struct {
	// ExitCode is the field holding the task's exit code (a number).
	ExitCode string `yaml:"exit_code"`
	// Stdout is the field holding its standard output (a string).
	Stdout string `yaml:"stdout"`
	// Stderr is the field holding its standard error (a string; optional).
	Stderr string `yaml:"stderr,omitempty"`
}

// GatewayHost is how the runner finds an instance's containers on this
// machine's Docker engine, as the document's proof does (`docker ps`).
type GatewayHost struct {
	// Box is the box container's name, ${ID} the instance ID (the
	// document: sandbox-${ID}).
	Box string `yaml:"box"`
	// Egress is the egress sidecar's name (the document:
	// sandbox-egress-${ID}).
	Egress string `yaml:"egress"`
	// KeyEnv is the variable of the egress sidecar's environment that holds
	// the instance's scoped key outside the box (the credential vault).
	KeyEnv string `yaml:"key_env"`
	// KeyCheckPath is a gateway path a scoped key is accepted on (a GET
	// answering 200 with it), used to prove the key works before delete and
	// is refused (401 or 403) after, e.g. /v1/models.
	KeyCheckPath string `yaml:"key_check_path"`
}

// GatewayTimeout is the bound of one API call.
func (g *Gateway) GatewayTimeout() time.Duration {
	if g == nil || g.Timeout == "" {
		return 30 * time.Second
	}
	d, err := time.ParseDuration(g.Timeout)
	if err != nil {
		return 30 * time.Second
	}
	return d
}

var (
	envNamePattern  = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
	jsonNamePattern = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
)

func (v *validator) checkGateway(g *Gateway) {
	u, err := url.Parse(g.URL)
	switch {
	case g.URL == "":
		v.add("$.gateway.url", "is required, e.g. http://127.0.0.1:8470")
	case err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || (u.Path != "" && u.Path != "/") || u.User != nil:
		v.add("$.gateway.url", "must be http(s)://host:port without a path or credentials (got %q)", g.URL)
	}
	if !envNamePattern.MatchString(g.AdminKeyEnv) {
		v.add("$.gateway.admin_key_env", "must name an environment variable holding the admin key (got %q); the key itself never goes in the file", g.AdminKeyEnv)
	}
	switch {
	case g.RuntimeProfile == "ephemeral-task":
		v.add("$.gateway.runtime_profile", "ephemeral-task is not supported: its box is killed after one task, and the probe binary is copied in through tasks first; use session or pooled")
	case !slices.Contains([]string{"session", "pooled"}, g.RuntimeProfile):
		v.add("$.gateway.runtime_profile", "%q is not one of [session pooled]", g.RuntimeProfile)
	}
	if g.Substrate != "" && !jsonNamePattern.MatchString(g.Substrate) {
		v.add("$.gateway.substrate", "%q is not a substrate name", g.Substrate)
	}
	if g.TaskResponse == nil {
		v.add("$.gateway.task_response", "is required: the document does not describe the task response, so name its exit_code and stdout fields (the runner never guesses)")
	} else {
		tr := g.TaskResponse
		for _, f := range []struct{ path, val string }{{"exit_code", tr.ExitCode}, {"stdout", tr.Stdout}} {
			if !jsonNamePattern.MatchString(f.val) {
				v.add("$.gateway.task_response."+f.path, "must name a top-level JSON field (got %q)", f.val)
			}
		}
		if tr.Stderr != "" && !jsonNamePattern.MatchString(tr.Stderr) {
			v.add("$.gateway.task_response.stderr", "must name a top-level JSON field (got %q)", tr.Stderr)
		}
	}
	if g.Timeout != "" {
		if d, err := time.ParseDuration(g.Timeout); err != nil || d < time.Second || d > 10*time.Minute {
			v.add("$.gateway.timeout", "must be a duration from 1s to 10m such as 30s (got %q)", g.Timeout)
		}
	}
	if h := g.Host; h != nil {
		for _, f := range []struct{ path, val string }{{"box", h.Box}, {"egress", h.Egress}} {
			if m := commandVar.FindAllStringSubmatch(f.val, -1); len(m) != 1 || m[0][1] != "ID" {
				v.add("$.gateway.host."+f.path, "must name the container with ${ID} once, e.g. sandbox-${ID} (got %q)", f.val)
			}
		}
		if !envNamePattern.MatchString(h.KeyEnv) {
			v.add("$.gateway.host.key_env", "must name the sidecar's variable holding the scoped key (got %q)", h.KeyEnv)
		}
		if len(h.KeyCheckPath) < 2 || h.KeyCheckPath[0] != '/' {
			v.add("$.gateway.host.key_check_path", "must be a path such as /v1/models (got %q)", h.KeyCheckPath)
		}
	}
}
