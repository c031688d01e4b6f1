package opensandbox

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
)

// maxLabel is the longest label value, and name, Kubernetes allows.
const maxLabel = 63

// CheckMetadata checks a target's metadata against the label rules
// upstream enforces at create, with the reserved opensandbox.io/ prefix:
// one message per problem, by key (nil when it holds).
func CheckMetadata(md map[string]string) []string {
	var out []string
	keys := make([]string, 0, len(md))
	for k := range md {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		v := md[k]
		switch {
		case strings.HasPrefix(k, "opensandbox.io/"):
			out = append(out, fmt.Sprintf("metadata key %q: the opensandbox.io/ prefix is reserved by the server", k))
		case !labelKeyValid(k):
			out = append(out, fmt.Sprintf("metadata key %q is not a Kubernetes label key (a name of at most 63 characters, [A-Za-z0-9] at both ends, '-', '_', '.' between, optionally behind a DNS-subdomain prefix and '/')", k))
		}
		if !labelValueValid(v) {
			out = append(out, fmt.Sprintf("metadata value %q of %q is not a Kubernetes label value (at most 63 characters, [A-Za-z0-9] at both ends, '-', '_', '.' between)", v, k))
		}
	}
	return out
}

// labelKeyValid and labelValueValid are the Kubernetes label rules, which
// upstream holds metadata to at create (a 400 otherwise; server
// services/validators.py 54-57, 71-131), as apimachinery states them (and
// targets validate checks them).
func labelKeyValid(key string) bool { return len(validation.IsQualifiedName(key)) == 0 }

func labelValueValid(v string) bool { return len(validation.IsValidLabelValue(v)) == 0 }

// asLabelValue makes a value the harness chose (a sandbox's name, a task
// or target name) a valid label value, the same way every time, so a
// lookup by it finds what the create wrote: characters a label may not hold
// become '-', the ends are trimmed to alphanumerics, and a value still over
// 63 characters keeps its first 54 and a hash of the whole.
func asLabelValue(s string) string {
	if labelValueValid(s) {
		return s
	}
	b := []byte(s)
	for i, c := range b {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.') {
			b[i] = '-'
		}
	}
	v := strings.TrimFunc(string(b), func(r rune) bool { return !isAlnum(r) })
	if len(v) > maxLabel {
		sum := sha256.Sum256([]byte(s))
		head := strings.TrimRightFunc(v[:54], func(r rune) bool { return !isAlnum(r) })
		v = head + "-" + hex.EncodeToString(sum[:4])
	}
	return v
}

func isAlnum(r rune) bool {
	return r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9'
}
