package impl

import (
	"strings"
	"testing"
)

func TestScanEnv(t *testing.T) {
	tests := []struct {
		kv, want string // want: pattern, "" for no finding
	}{
		{"AWS_ACCESS_KEY_ID=AKIAIOSFODNN7EXAMPLE", "aws-access-key-id"},
		{"X=prefix ASIAABCDEFGHIJKLMNOP suffix", "aws-access-key-id"},
		{"AWS_SECRET_ACCESS_KEY=wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", "aws-secret-access-key"},
		{"GH=ghp_" + strings.Repeat("a", 36), "github-token"},
		{"GH=github_pat_" + strings.Repeat("A", 30), "github-fine-grained-pat"},
		{"GL=glpat-" + strings.Repeat("x", 20), "gitlab-token"},
		{"SLACK=xoxb-1234567890-abc", "slack-token"},
		{"OPENAI=sk-" + strings.Repeat("z", 40), "sk-api-key"},
		{"ANTHROPIC=sk-ant-api03-" + strings.Repeat("z", 40), "sk-api-key"},
		{"G=AIza" + strings.Repeat("b", 35), "google-api-key"},
		{"KEY=-----BEGIN OPENSSH PRIVATE KEY-----\nabc", "private-key"},
		{"DATABASE_URL=postgres://user:hunter22@db:5432/x", "url-credentials"},
		{"MY_API_KEY=0123456789abcdef0123", "secret-name-long-value"},
		{"DB_PASSWORD=correcthorsebatterystaple", "secret-name-long-value"},
		// Not secrets.
		{"PATH=/usr/local/bin:/usr/bin", ""},
		{"HOME=/root", ""},
		{"TOKENIZERS_PARALLELISM=false", ""},
		{"GOOGLE_APPLICATION_CREDENTIALS=/var/run/secrets/creds.json", ""},
		{"PASSWORD=short", ""},
		{"SECRET_DIR=https://example.invalid/some/long/path", ""},
		{"EMPTY_TOKEN=", ""},
		{"NOEQUALS", ""},
	}
	for _, tt := range tests {
		got := scanEnv([]string{tt.kv})
		name, _, _ := strings.Cut(tt.kv, "=")
		switch {
		case tt.want == "" && len(got) != 0:
			t.Errorf("%s: flagged as %s, want nothing", name, got[0].Pattern)
		case tt.want != "" && (len(got) != 1 || got[0].Pattern != tt.want || got[0].Name != name):
			t.Errorf("%s: got %+v, want pattern %s", name, got, tt.want)
		}
	}
}

func TestEnvSecretShapeNeverReportsValues(t *testing.T) {
	const secret = "AKIAIOSFODNN7EXAMPLE"
	t.Setenv("SANDCHECK_TEST_KEY", secret)
	r := envSecretShape(t.Context(), probesParams())
	if r.Outcome != "escaped" {
		t.Fatalf("outcome %s, want escaped", r.Outcome)
	}
	for k, v := range r.Evidence {
		if strings.Contains(v, secret) {
			t.Errorf("evidence %s carries the secret value", k)
		}
	}
	if strings.Contains(r.Detail, secret) {
		t.Error("detail carries the secret value")
	}
	if !strings.Contains(r.Evidence["findings"], "SANDCHECK_TEST_KEY:aws-access-key-id") {
		t.Errorf("findings = %q, want the variable name and pattern", r.Evidence["findings"])
	}
}
