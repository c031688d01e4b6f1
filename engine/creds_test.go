package engine

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sandcheck/sandcheck/probes"
)

// Only a proof made with the invocation's token over a secret planted for
// the same probe counts as host evidence of the escape.
func TestCredsCheckJoinsProofs(t *testing.T) {
	dir := t.TempDir()
	c, err := plantCreds(dir)
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(dir, CredHomeDir, ".netrc"))
	if err != nil {
		t.Fatal(err)
	}
	f := strings.Fields(string(b))
	pw := f[len(f)-1]
	if it, ok := c.check("secrets.netrc", "tok1", proof("tok1", pw)); !ok || it.Indicates != probes.Escaped {
		t.Errorf("right proof: %+v %t", it, ok)
	}
	for _, bad := range []struct{ probe, token, proofs string }{
		{"secrets.netrc", "tok2", proof("tok1", pw)},      // another invocation's proof
		{"secrets.kubeconfig", "tok1", proof("tok1", pw)}, // planted for another probe
		{"secrets.netrc", "tok1", proof("tok1", pw+"x")},  // not the planted value
		{"secrets.netrc", "tok1", ""},                     // nothing reported
	} {
		if it, _ := c.check(bad.probe, bad.token, bad.proofs); it.Indicates == probes.Escaped {
			t.Errorf("%+v counted as escaped: %+v", bad, it)
		}
	}
	if _, ok := c.check("secrets.unplanted", "tok1", ""); ok {
		t.Error("a probe with nothing planted got host evidence")
	}
	if _, err := os.Stat(filepath.Join(dir, ServiceAccountDir, "token")); err != nil {
		t.Errorf("service-account token not planted: %v", err)
	}
}
