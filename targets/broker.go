package targets

import (
	"net/url"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"
)

// Broker declares the platform's tool or credential broker, so the broker
// probes can test the tokens it hands a task: how long they live, what they
// open, and whether they die with the task and on revocation. A target
// without one leaves those probes not-tested.
type Broker struct {
	// Reference, when set, is the harness's own reference broker in that
	// mode (weak or hardened), served on the harness network beside the
	// tool broker: the harness plays the platform, minting a token per
	// task. The fixtures' weak and hardened references declare it.
	Reference string `yaml:"reference,omitempty"`
	// Token says where a task finds its token in the box (a real
	// platform's broker; exclusive with Reference).
	Token *BrokerToken `yaml:"token,omitempty"`
	// Introspect is the URL of the platform's introspection endpoint (RFC
	// 7662: POST token=...), reachable from the box.
	Introspect string `yaml:"introspect,omitempty"`
	// Revoke is the platform's revocation call, made by the harness.
	Revoke *BrokerRevoke `yaml:"revoke,omitempty"`
	// RevocationBound is how soon after the revoke call the token must be
	// refused, e.g. 5s (empty: DefaultRevocationBound).
	RevocationBound string `yaml:"revocation_bound,omitempty"`
}

// BrokerToken is where the box holds the task's broker token: exactly one
// of an environment variable or a file.
type BrokerToken struct {
	// Env names the environment variable holding the token.
	Env string `yaml:"env,omitempty"`
	// File is the absolute path of the file holding the token.
	File string `yaml:"file,omitempty"`
}

// BrokerRevoke is the platform's revocation call: an HTTP request or a
// command (argv, no shell), each naming the token as ${TOKEN} or, better,
// ${TOKEN_SHA256}.
type BrokerRevoke struct {
	// URL, Method and Body make an HTTP request (Method defaults to POST).
	URL    string `yaml:"url,omitempty"`
	Method string `yaml:"method,omitempty"`
	Body   string `yaml:"body,omitempty"`
	// Command is the argv of a command run on the host.
	Command []string `yaml:"command,omitempty"`
}

// DefaultRevocationBound is how soon a revoked token must be refused when
// the target does not say.
const DefaultRevocationBound = 5 * time.Second

// Broker reference modes (canary.BrokerModes).
var brokerModes = []string{"weak", "hardened"}

var (
	envName        = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
	tokenPlacement = regexp.MustCompile(`\$\{TOKEN(_SHA256)?\}`)
)

// BrokerReference is the mode of the reference broker the target declares
// ("" when it declares none or a platform's own).
func (t *Target) BrokerReference() string {
	if t.Broker == nil {
		return ""
	}
	return t.Broker.Reference
}

// Bound is how soon a revoked token must be refused.
func (b *Broker) Bound() time.Duration {
	if b == nil || b.RevocationBound == "" {
		return DefaultRevocationBound
	}
	d, err := time.ParseDuration(b.RevocationBound)
	if err != nil {
		return DefaultRevocationBound
	}
	return d
}

func (v *validator) checkBroker(b *Broker) {
	const p = "$.broker"
	switch {
	case b.Reference != "" && (b.Token != nil || b.Introspect != "" || b.Revoke != nil):
		v.add(p+".reference", "the reference broker is the harness's own: it takes no token, introspect or revoke")
	case b.Reference != "" && !slices.Contains(brokerModes, b.Reference):
		v.add(p+".reference", "%q is not one of %v", b.Reference, brokerModes)
	case b.Reference == "" && b.Token == nil:
		v.add(p, "needs reference (the harness's reference broker) or token (where the box holds the platform's token)")
	}
	if t := b.Token; t != nil {
		switch {
		case (t.Env == "") == (t.File == ""):
			v.add(p+".token", "needs exactly one of env or file")
		case t.Env != "" && !envName.MatchString(t.Env):
			v.add(p+".token.env", "%q is not an environment variable name", t.Env)
		case t.File != "" && (!filepath.IsAbs(t.File) || filepath.Clean(t.File) != t.File):
			v.add(p+".token.file", "must be a clean absolute path (got %q)", t.File)
		}
	}
	if b.Introspect != "" {
		if u, err := url.Parse(b.Introspect); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			v.add(p+".introspect", "must be an http or https URL (got %q)", b.Introspect)
		}
	}
	if r := b.Revoke; r != nil {
		switch {
		case (r.URL == "") == (len(r.Command) == 0):
			v.add(p+".revoke", "needs exactly one of url or command")
		case r.URL != "":
			if u, err := url.Parse(strings.NewReplacer("${TOKEN}", "t", "${TOKEN_SHA256}", "t").Replace(r.URL)); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
				v.add(p+".revoke.url", "must be an http or https URL (got %q)", r.URL)
			}
			if !slices.Contains([]string{"", "POST", "DELETE", "PUT"}, r.Method) {
				v.add(p+".revoke.method", "must be POST, DELETE or PUT (got %q)", r.Method)
			}
			if !tokenPlacement.MatchString(r.URL + r.Body) {
				v.add(p+".revoke", "the request must name the token as ${TOKEN} or ${TOKEN_SHA256}")
			}
		default:
			if !tokenPlacement.MatchString(strings.Join(r.Command, " ")) {
				v.add(p+".revoke.command", "the command must name the token as ${TOKEN} or ${TOKEN_SHA256}")
			}
		}
	}
	if b.RevocationBound != "" {
		if d, err := time.ParseDuration(b.RevocationBound); err != nil || d < 100*time.Millisecond || d > time.Minute {
			v.add(p+".revocation_bound", "must be a duration from 100ms to 1m (got %q)", b.RevocationBound)
		}
	}
}
