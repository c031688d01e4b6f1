package policies

import (
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"fmt"
	"io/fs"
	"path"
	"sort"
	"strings"
)

//go:embed rego/*.rego
var regoFS embed.FS

// Query is the Rego query that yields the verdict.
const Query = "data.sandcheck.release.verdict"

// Version identifies the embedded release criteria: "sha256:" and the hex
// digest of the policy modules (names and bytes, in name order; tests
// excluded). It is what a run record carries as tool.policy_version when no
// user policy is added; Grader.Version covers user policies too.
var Version = digest(builtinModules())

// module is one Rego source file.
type module struct {
	name string // base file name: a user module replaces the embedded one of the same name
	file string // where it came from, for errors
	src  string
}

// policyFiles returns the embedded Rego file paths, sorted; tests are
// included only when withTests is set.
func policyFiles(withTests bool) []string {
	names, err := fs.Glob(regoFS, "rego/*.rego")
	if err != nil {
		panic(fmt.Sprintf("listing embedded rego: %v", err)) // a constant pattern cannot fail
	}
	var out []string
	for _, n := range names {
		if withTests || !isTest(n) {
			out = append(out, n)
		}
	}
	sort.Strings(out)
	return out
}

func isTest(name string) bool { return strings.HasSuffix(name, "_test.rego") }

// builtinModules returns the embedded policy (tests excluded), named by
// base file name.
func builtinModules() []module {
	var ms []module
	for _, n := range policyFiles(false) {
		b, err := regoFS.ReadFile(n)
		if err != nil {
			panic(fmt.Sprintf("reading embedded %s: %v", n, err)) // embedded: cannot fail
		}
		ms = append(ms, module{name: path.Base(n), file: "policies/" + n, src: string(b)})
	}
	return ms
}

// digest hashes modules in name order. Both parts are length-prefixed so no
// two module sets hash alike.
func digest(ms []module) string {
	sorted := append([]module(nil), ms...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].name < sorted[j].name })
	h := sha256.New()
	for _, m := range sorted {
		fmt.Fprintf(h, "%d:%s%d:", len(m.name), m.name, len(m.src))
		h.Write([]byte(m.src))
	}
	return "sha256:" + hex.EncodeToString(h.Sum(nil))
}
