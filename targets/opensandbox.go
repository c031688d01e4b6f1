package targets

import (
	"fmt"
	"maps"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/validation"
)

// OpenSandbox is how the opensandbox runner asks an OpenSandbox lifecycle
// server for each sandbox: the server's address and the create request's
// settings. The API key is never in the file: APIKeyEnv names the
// environment variable that holds it.
type OpenSandbox struct {
	// URL is the lifecycle API's base, e.g. http://127.0.0.1:8080/v1.
	URL string `yaml:"url"`
	// APIKeyEnv names the environment variable holding the key sent as
	// OPEN-SANDBOX-API-KEY; empty sends none (a server without a key).
	APIKeyEnv string `yaml:"api_key_env,omitempty"`
	// Entrypoint is the sandbox's first process (the official SDK's default,
	// ["tail", "-f", "/dev/null"], when empty).
	Entrypoint []string `yaml:"entrypoint,omitempty"`
	// Resources are the create request's resourceLimits.
	Resources *OpenSandboxResources `yaml:"resources,omitempty"`
	// Timeout is the sandbox's lifetime in seconds (at least 60); 0 asks for
	// none (manual cleanup).
	Timeout int `yaml:"timeout,omitempty"`
	// NetworkPolicy is the create request's networkPolicy; nil sends none,
	// which upstream takes as unrestricted egress.
	NetworkPolicy *OpenSandboxPolicy `yaml:"network_policy,omitempty"`
	// Env is the create request's env.
	Env map[string]string `yaml:"env,omitempty"`
	// Metadata is the create request's metadata (the opensandbox.io/ prefix
	// is reserved; the runner adds the run's sandcheck.* labels).
	Metadata map[string]string `yaml:"metadata,omitempty"`
	// PollInterval is the pause between state polls (default 2s, as the
	// official SDK).
	PollInterval string `yaml:"poll_interval,omitempty"`
	// RequestTimeout bounds each API call (default 30s).
	RequestTimeout string `yaml:"request_timeout,omitempty"`
}

// OpenSandboxResources are resource limits as Kubernetes quantities.
type OpenSandboxResources struct {
	// CPU, e.g. "500m" or "1".
	CPU string `yaml:"cpu,omitempty"`
	// Memory, e.g. "512Mi".
	Memory string `yaml:"memory,omitempty"`
}

// OpenSandboxPolicy is an egress policy: the first matching rule wins, else
// the default action.
type OpenSandboxPolicy struct {
	// DefaultAction is allow or deny.
	DefaultAction string `yaml:"default_action"`
	// Egress are the rules in order.
	Egress []OpenSandboxRule `yaml:"egress,omitempty"`
}

// OpenSandboxRule is one egress rule.
type OpenSandboxRule struct {
	// Action is allow or deny.
	Action string `yaml:"action"`
	// Target is a domain ("pypi.org", "*.example.com"), an IP or a CIDR.
	Target string `yaml:"target"`
}

var (
	cpuQuantity = regexp.MustCompile(`^([0-9]+m|[0-9]+(\.[0-9]+)?)$`)
	memQuantity = regexp.MustCompile(`^[0-9]+(Ki|Mi|Gi|K|M|G)?$`)
)

// PollEvery is the state poll interval (PollInterval, default 2s).
func (o *OpenSandbox) PollEvery() time.Duration { return durationOr(o.PollInterval, 2*time.Second) }

// CallTimeout bounds one API call (RequestTimeout, default 30s).
func (o *OpenSandbox) CallTimeout() time.Duration {
	return durationOr(o.RequestTimeout, 30*time.Second)
}

func durationOr(s string, def time.Duration) time.Duration {
	if d, err := time.ParseDuration(s); err == nil && d > 0 {
		return d
	}
	return def
}

func (v *validator) checkOpenSandbox(t *Target) {
	o := t.OpenSandbox
	if t.Image == "" {
		v.add("$.image", "is required (the create request's image.uri)")
	}
	u, err := url.Parse(o.URL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		v.add("$.opensandbox.url", "%q is not an http(s) URL", o.URL)
	} else if u.User != nil {
		v.add("$.opensandbox.url", "must not carry credentials (name the key's variable in api_key_env)")
	}
	if o.APIKeyEnv != "" && !envNamePattern.MatchString(o.APIKeyEnv) {
		v.add("$.opensandbox.api_key_env", "%q is not an environment variable name", o.APIKeyEnv)
	}
	if o.Timeout != 0 && o.Timeout < 60 {
		v.add("$.opensandbox.timeout", "must be at least 60 (seconds), or 0 for none")
	}
	if r := o.Resources; r != nil {
		if r.CPU != "" && !cpuQuantity.MatchString(r.CPU) {
			v.add("$.opensandbox.resources.cpu", "%q is not a CPU quantity (500m, 1, 0.5)", r.CPU)
		}
		if r.Memory != "" && !memQuantity.MatchString(r.Memory) {
			v.add("$.opensandbox.resources.memory", "%q is not a memory quantity (512Mi, 1Gi)", r.Memory)
		}
	}
	if p := o.NetworkPolicy; p != nil {
		if p.DefaultAction != "allow" && p.DefaultAction != "deny" {
			v.add("$.opensandbox.network_policy.default_action", "%q is not allow or deny", p.DefaultAction)
		}
		for i, r := range p.Egress {
			path := fmt.Sprintf("$.opensandbox.network_policy.egress[%d]", i)
			if r.Action != "allow" && r.Action != "deny" {
				v.add(path+".action", "%q is not allow or deny", r.Action)
			}
			if r.Target == "" {
				v.add(path+".target", "is required")
			}
		}
	}
	// Upstream checks metadata as Kubernetes labels at create
	// (services/validators.py 97-131): a key a qualified name, a value at
	// most 63 characters of [A-Za-z0-9._-], alphanumeric at both ends.
	for _, k := range slices.Sorted(maps.Keys(o.Metadata)) {
		path := "$.opensandbox.metadata." + k
		if strings.HasPrefix(k, "opensandbox.io/") {
			v.add(path, "the opensandbox.io/ prefix is reserved by the server")
		} else if errs := validation.IsQualifiedName(k); len(errs) > 0 {
			v.add(path, "key %q is not a Kubernetes label key: %s", k, strings.Join(errs, "; "))
		}
		if errs := validation.IsValidLabelValue(o.Metadata[k]); len(errs) > 0 {
			v.add(path, "value %q is not a Kubernetes label value: %s", o.Metadata[k], strings.Join(errs, "; "))
		}
	}
	v.checkEnv("$.opensandbox.env", o.Env)
	for _, d := range []struct{ path, val string }{{"$.opensandbox.poll_interval", o.PollInterval}, {"$.opensandbox.request_timeout", o.RequestTimeout}} {
		if d.val == "" {
			continue
		}
		if x, err := time.ParseDuration(d.val); err != nil || x <= 0 {
			v.add(d.path, "%q is not a positive duration (2s, 500ms)", d.val)
		}
	}
}
