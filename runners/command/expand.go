package command

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
)

// vars are the values of one call's ${VAR} words; splat values expand a
// word that is exactly ${NAME} into several words.
type vars struct {
	one   map[string]string
	splat map[string][]string
}

var varRef = regexp.MustCompile(`\$\{([^}]*)\}`)

// expand fills a step's argv. The target was validated, so every variable
// is one of the step's; a variable without a value is an error (never an
// empty word passed silently).
func expand(step string, tmpl []string, v vars) ([]string, error) {
	var out []string
	for _, w := range tmpl {
		if m := varRef.FindStringSubmatch(w); m != nil && m[0] == w {
			if words, ok := v.splat[m[1]]; ok {
				out = append(out, words...)
				continue
			}
		}
		var missing []string
		s := varRef.ReplaceAllStringFunc(w, func(ref string) string {
			name := ref[2 : len(ref)-1]
			val, ok := v.one[name]
			if !ok {
				missing = append(missing, name)
			}
			return val
		})
		if len(missing) > 0 {
			return nil, fmt.Errorf("command %s: ${%s} has no value in this call", step, strings.Join(missing, "}, ${"))
		}
		out = append(out, s)
	}
	return out, nil
}

// envArgs expands the target's env_arg once per variable, in name order.
func envArgs(tmpl []string, env map[string]string) ([]string, error) {
	keys := make([]string, 0, len(env))
	for k := range env {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var out []string
	for _, k := range keys {
		words, err := expand("env_arg", tmpl, vars{one: map[string]string{"KEY": k, "VALUE": env[k]}})
		if err != nil {
			return nil, err
		}
		out = append(out, words...)
	}
	return out, nil
}
