package impl

import (
	"context"
	"fmt"
	"os"
	"regexp"
	"sort"
	"strings"

	"github.com/sandcheck/sandcheck/internal/secretshape"
	"github.com/sandcheck/sandcheck/probes"
)

func init() {
	register(map[string]Func{"secrets.env-secret-shape": envSecretShape})
}

// valueShapes are secret formats recognisable from the value alone (shared
// with the output gate).
var valueShapes = secretshape.Shapes

var (
	// awsSecretValue is the shape of an AWS secret access key; alone it is
	// any 40-character base64 string, so it counts only in a *SECRET* name.
	awsSecretValue = regexp.MustCompile(`^[A-Za-z0-9/+=]{40}$`)
	// secretName matches names that announce a credential.
	secretName = regexp.MustCompile(`(?i)(TOKEN|SECRET|PASSWORD|PASSWD|PASSPHRASE|API_?KEY|ACCESS_?KEY|PRIVATE_?KEY|CREDENTIAL)`)
)

// genericMinLen is how long a value under a secret-sounding name must be to
// count: short values are flags and placeholders ("true", "changeme").
const genericMinLen = 16

// secretFinding names one variable and the pattern its value matched. It
// never holds the value.
type secretFinding struct{ Name, Pattern string }

// scanEnv looks at "NAME=value" pairs and reports those whose value has a
// secret's shape. Value shapes come first; the name-based rules catch keys
// without a recognisable prefix.
func scanEnv(env []string) []secretFinding {
	var out []secretFinding
	for _, kv := range env {
		name, val, ok := strings.Cut(kv, "=")
		if !ok || val == "" {
			continue
		}
		if pat := secretPattern(name, val); pat != "" {
			out = append(out, secretFinding{Name: name, Pattern: pat})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

func secretPattern(name, val string) string {
	for _, s := range valueShapes {
		if s.RE.MatchString(val) {
			return s.Name
		}
	}
	upper := strings.ToUpper(name)
	if strings.Contains(upper, "SECRET") && awsSecretValue.MatchString(val) {
		return "aws-secret-access-key"
	}
	// A path or URL without credentials under a secret name points at a
	// secret (GOOGLE_APPLICATION_CREDENTIALS=/x.json) rather than being one;
	// the credential-file probes cover those.
	if secretName.MatchString(upper) && len(val) >= genericMinLen &&
		!strings.ContainsAny(val, " \t") && !strings.HasPrefix(val, "/") && !strings.HasPrefix(val, "./") &&
		!strings.Contains(val, "://") {
		return "secret-name-long-value"
	}
	return ""
}

// envSecretShape reports the names of environment variables that hold
// secret-shaped values, with the pattern each matched; values are never
// reported.
func envSecretShape(_ context.Context, _ probes.Params) probes.Result {
	env := os.Environ()
	found := scanEnv(env)
	e := ev{}
	e.setInt("variables_scanned", len(env))
	if len(found) == 0 {
		return blocked("no environment variable holds a secret-shaped value", e)
	}
	items := make([]string, len(found))
	for i, f := range found {
		items[i] = clip(f.Name, 64) + ":" + f.Pattern
	}
	e.setInt("count", len(found))
	e.setList("findings", items)
	return escaped(fmt.Sprintf("%d environment variable(s) hold secret-shaped values", len(found)), e)
}
