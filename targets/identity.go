package targets

import (
	"fmt"
	"regexp"
	"sort"
	"strings"
)

// The variables a target's hostname and labels may name; the harness fills
// them for each sandbox, so the identity a platform gives a sandbox can be
// bound to the run, the target and the task.
const (
	VarRunID  = "${SANDCHECK_RUN_ID}"
	VarTarget = "${SANDCHECK_TARGET}"
	VarTask   = "${SANDCHECK_TASK}"
)

// Identity is what the harness knows of one sandbox, to fill a target's
// hostname and labels.
type Identity struct {
	RunID  string
	Target string
	Task   string
}

var (
	identityVar = regexp.MustCompile(`\$\{[^}]*\}`)
	// labelKey is what Docker and the platforms that label sandboxes write:
	// reverse-DNS keys, upper case, and Kubernetes-style prefixes such as
	// acme.io/run; no blanks, no '='.
	labelKey = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._/:-]{0,254}$`)
)

// maxHostname is the kernel's limit on a UTS host name (and RFC 1123's on
// one label).
const maxHostname = 63

// checkIdentity validates the docker hostname and labels: only the identity
// variables, and no label under the harness's own sandcheck. prefix.
func (v *validator) checkIdentity(d *Docker) {
	known := func(path, s string) {
		for _, m := range identityVar.FindAllString(s, -1) {
			if m != VarRunID && m != VarTarget && m != VarTask {
				v.add(path, "%s is not one of %s, %s, %s", m, VarRunID, VarTarget, VarTask)
			}
		}
	}
	if d.Hostname != "" {
		known("$.docker.hostname", d.Hostname)
		if s := identityVar.ReplaceAllString(d.Hostname, "x"); !hostnameChars.MatchString(s) {
			v.add("$.docker.hostname", "must be lower-case letters, digits and '-' besides the variables (got %q)", d.Hostname)
		}
	}
	keys := make([]string, 0, len(d.Labels))
	for k := range d.Labels {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		p := "$.docker.labels." + k
		switch {
		case !labelKey.MatchString(k):
			v.add(p, "label names are letters, digits, '.', '_', '-', '/' and ':', starting with a letter or digit")
		case strings.HasPrefix(k, "sandcheck.") || k == "sandcheck":
			v.add(p, "the sandcheck. prefix is reserved for the harness's own labels")
		}
		known(p, d.Labels[k])
	}
}

var hostnameChars = regexp.MustCompile(`^[a-z0-9]([a-z0-9-]*[a-z0-9])?$`)

// IdentityHostname is the docker hostname for one identity (see
// Identity.Hostname).
func (d *Docker) IdentityHostname(id Identity) string {
	if d == nil {
		return ""
	}
	return id.Hostname(d.Hostname)
}

// IdentityLabels are the docker labels for one identity (see
// Identity.Labels).
func (d *Docker) IdentityLabels(id Identity) map[string]string {
	if d == nil {
		return nil
	}
	return id.Labels(d.Labels)
}

// Hostname returns the sandbox's host name for this identity: the
// template with the variables filled, made a valid host name (lower case,
// letters, digits and '-', at most 63 characters, cut at the end so the
// run ID written first survives). Empty when the template is (the runtime
// then picks one).
func (id Identity) Hostname(template string) string {
	if template == "" {
		return ""
	}
	s := strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9', r == '-':
			return r
		case r >= 'A' && r <= 'Z':
			return r + 'a' - 'A'
		}
		return '-'
	}, id.expand(template))
	if len(s) > maxHostname {
		s = s[:maxHostname]
	}
	return strings.Trim(s, "-")
}

// Labels returns the label templates with this identity's variables
// filled (nil for none).
func (id Identity) Labels(templates map[string]string) map[string]string {
	if len(templates) == 0 {
		return nil
	}
	out := make(map[string]string, len(templates))
	for k, v := range templates {
		out[k] = id.expand(v)
	}
	return out
}

// Expand fills the identity variables in s.
func (id Identity) Expand(s string) string { return id.expand(s) }

func (id Identity) expand(s string) string {
	return strings.NewReplacer(VarRunID, id.RunID, VarTarget, id.Target, VarTask, id.Task).Replace(s)
}

// String names the identity in errors and logs.
func (id Identity) String() string {
	return fmt.Sprintf("run %s, target %s, task %s", id.RunID, id.Target, id.Task)
}

// Attribution names the platform's labels that carry each sandbox's
// identities, as the threat model asks: every sandbox attributable to its
// run, its task and the policy it runs under, through identities the
// platform itself gives (acme.io/run, not sandcheck's vocabulary). The
// harness reads them from the runtime's view of each sandbox (Docker
// labels, Kubernetes pod labels; annotations are not in the view yet).
type Attribution struct {
	// Run is the label carrying the platform's run (or session) identity.
	Run string `yaml:"run"`
	// Task is the label carrying the platform's task identity.
	Task string `yaml:"task"`
	// Policy is the label carrying the policy (or profile) identity the
	// sandbox runs under.
	Policy string `yaml:"policy"`
}

// Keys maps run, task and policy to the label that carries each.
func (a *Attribution) Keys() map[string]string {
	if a == nil {
		return nil
	}
	return map[string]string{"run": a.Run, "task": a.Task, "policy": a.Policy}
}

// checkAttribution: each identity names one label, a valid label key. The
// harness's own sandcheck. labels are not the platform's.
func (v *validator) checkAttribution(a *Attribution) {
	for _, f := range []struct{ name, key string }{{"run", a.Run}, {"task", a.Task}, {"policy", a.Policy}} {
		p := "$.attribution." + f.name
		switch {
		case f.key == "":
			v.add(p, "names the platform's label that carries the sandbox's %s identity; required", f.name)
		case !labelKey.MatchString(f.key):
			v.add(p, "label names are letters, digits, '.', '_', '-', '/' and ':', starting with a letter or digit (got %q)", f.key)
		case strings.HasPrefix(f.key, "sandcheck.") || f.key == "sandcheck":
			v.add(p, "%q is one of the harness's own labels, not the platform's", f.key)
		}
	}
}
