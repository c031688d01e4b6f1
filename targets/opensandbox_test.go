package targets

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestOpenSandboxSection: the opensandbox section's errors name the field,
// and a key can only come from a variable (the file has no place for one).
func TestOpenSandboxSection(t *testing.T) {
	head := "schema: sandcheck.dev/target/v1\nname: x\nrunner: opensandbox\nimage: i\nprofile: high-risk-code\n"
	cases := []struct{ name, src, want string }{
		{"no section", head, "runner opensandbox needs an opensandbox: section"},
		{"no url", head + "opensandbox:\n  api_key_env: K\n", "$.opensandbox.url"},
		{"url with credentials", head + "opensandbox:\n  url: http://u:p@127.0.0.1:1/v1\n", "must not carry credentials"},
		{"key in file", head + "opensandbox:\n  url: http://127.0.0.1:1/v1\n  api_key: secret\n", "api_key"},
		{"bad env name", head + "opensandbox:\n  url: http://127.0.0.1:1/v1\n  api_key_env: 'A B'\n", "$.opensandbox.api_key_env"},
		{"short timeout", head + "opensandbox:\n  url: http://127.0.0.1:1/v1\n  timeout: 30\n", "$.opensandbox.timeout"},
		{"bad cpu", head + "opensandbox:\n  url: http://127.0.0.1:1/v1\n  resources: {cpu: lots}\n", "$.opensandbox.resources.cpu"},
		{"bad policy", head + "opensandbox:\n  url: http://127.0.0.1:1/v1\n  network_policy: {default_action: maybe}\n", "$.opensandbox.network_policy.default_action"},
		{"reserved metadata", head + "opensandbox:\n  url: http://127.0.0.1:1/v1\n  metadata: {opensandbox.io/x: y}\n", "reserved"},
		// Upstream refuses these at create with a 400 (services/validators.py 97-131).
		{"label value too long", head + "opensandbox:\n  url: http://127.0.0.1:1/v1\n  metadata: {team: " + strings.Repeat("a", 64) + "}\n", "$.opensandbox.metadata.team: value"},
		{"label value not a label", head + "opensandbox:\n  url: http://127.0.0.1:1/v1\n  metadata: {team: 'a b'}\n", "is not a Kubernetes label value"},
		{"label key not a label", head + "opensandbox:\n  url: http://127.0.0.1:1/v1\n  metadata: {'-team': x}\n", "is not a Kubernetes label key"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := filepath.Join(t.TempDir(), "t.yaml")
			if err := os.WriteFile(p, []byte(c.src), 0o644); err != nil {
				t.Fatal(err)
			}
			_, err := Load(p)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("error %v, want one containing %q", err, c.want)
			}
		})
	}
	tg, err := Load("../fixtures/targets/opensandbox-hardened.yaml")
	if err != nil {
		t.Fatal(err)
	}
	o := tg.OpenSandbox
	if o.APIKeyEnv != "OPEN_SANDBOX_API_KEY" || o.NetworkPolicy == nil || o.NetworkPolicy.DefaultAction != "deny" || o.PollEvery() <= 0 {
		t.Errorf("hardened reference read as %+v", o)
	}
}
