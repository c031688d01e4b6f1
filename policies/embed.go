package policies

import (
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"fmt"
	"io/fs"
	"sort"
	"strings"
)

//go:embed *.rego
var regoFS embed.FS

// Query is the Rego query that yields the verdict.
const Query = "data.sandcheck.release.verdict"

// Version identifies the embedded release criteria: "sha256:" and the hex
// digest of the policy modules (names and bytes, in name order; tests
// excluded). It is what a run record carries as tool.policy_version.
var Version = version()

// policyFiles returns the embedded Rego file names, sorted; tests are
// included only when withTests is set.
func policyFiles(withTests bool) []string {
	names, err := fs.Glob(regoFS, "*.rego")
	if err != nil {
		panic(fmt.Sprintf("listing embedded rego: %v", err)) // a constant pattern cannot fail
	}
	var out []string
	for _, n := range names {
		if withTests || !strings.HasSuffix(n, "_test.rego") {
			out = append(out, n)
		}
	}
	sort.Strings(out)
	return out
}

func version() string {
	h := sha256.New()
	for _, n := range policyFiles(false) {
		b, err := regoFS.ReadFile(n)
		if err != nil {
			panic(fmt.Sprintf("reading embedded %s: %v", n, err)) // embedded: cannot fail
		}
		// Length-prefix both parts so no two file sets hash alike.
		fmt.Fprintf(h, "%d:%s%d:", len(n), n, len(b))
		h.Write(b)
	}
	return "sha256:" + hex.EncodeToString(h.Sum(nil))
}
