package impl

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"golang.org/x/sys/unix"
)

// Each parser keeps the secrets of its format and nothing that only points
// at one (URLs, file paths, key IDs).
func TestCredentialParsers(t *testing.T) {
	cases := []struct {
		name  string
		parse func([]byte) []string
		in    string
		want  []string
	}{
		{"aws", keyValueSecrets, "[default]\naws_access_key_id = AKIAXXXXXXXXXXXXXXXX\naws_secret_access_key = abcdEFGH1234abcdEFGH1234abcdEFGH1234abcd\nregion = us-east-1\n",
			[]string{"abcdEFGH1234abcdEFGH1234abcdEFGH1234abcd"}},
		{"kubeconfig", keyValueSecrets, "users:\n- name: a\n  user:\n    token: tok12345678\n    client-key-data: LS0tLS1CRUdJTi==\n    tokenFile: /var/run/x\n",
			[]string{"tok12345678", "LS0tLS1CRUdJTi=="}},
		{"npmrc", keyValueSecrets, "registry=https://registry.npmjs.org/\n//registry.npmjs.org/:_authToken=npm_abcdefgh\n",
			[]string{"npm_abcdefgh"}},
		{"pypirc quoted", keyValueSecrets, "[pypi]\nusername = __token__\npassword = \"pypi-abcdefgh\"\n", []string{"pypi-abcdefgh"}},
		{"docker", jsonSecrets, `{"auths":{"r":{"auth":"c2FuZDpjaGVjaw=="}},"credsStore":"desktop"}`, []string{"c2FuZDpjaGVjaw=="}},
		{"gcloud", jsonSecrets, `{"client_id":"x.apps","client_secret":"GOCSPX-abcdefgh","token_uri":"https://oauth2/x","refresh_token":"1//abcdefgh"}`,
			[]string{"GOCSPX-abcdefgh", "1//abcdefgh"}},
		{"netrc", netrcSecrets, "machine a login b password secret123\nmachine c login d password other456\n", []string{"secret123", "other456"}},
		{"git", urlSecrets, "https://user:ghp_abcdef@github.com\nhttps://github.com\n", []string{"ghp_abcdef"}},
		{"pem", pemBodies, "-----BEGIN CERTIFICATE-----\nQUJD\n-----END CERTIFICATE-----\n-----BEGIN OPENSSH PRIVATE KEY-----\nb3Blbn\nNzaC1r\n-----END OPENSSH PRIVATE KEY-----\n", []string{"b3BlbnNzaC1r"}},
		{"garbage json", jsonSecrets, `{"auth": `, nil},
	}
	for _, c := range cases {
		got := c.parse([]byte(c.in))
		slices.Sort(got)
		want := slices.Clone(c.want)
		slices.Sort(want)
		if !slices.Equal(got, want) {
			t.Errorf("%s: got %q, want %q", c.name, got, want)
		}
	}
}

// A credential file reached through a link is refused, not read, and a
// FIFO does not block the probe.
func TestOpenNoFollowRefusesLinksAndFIFOs(t *testing.T) {
	dir := t.TempDir()
	secret := filepath.Join(dir, "secret")
	if err := os.WriteFile(secret, []byte("password = abcdefgh123\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(dir, filepath.Join(dir, "linkdir")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(secret, filepath.Join(dir, "linkfile")); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mkfifo(filepath.Join(dir, "fifo"), 0o600); err != nil {
		t.Fatal(err)
	}
	s := &credSearch{}
	s.read(secret, keyValueSecrets)
	s.read(filepath.Join(dir, "linkdir", "secret"), keyValueSecrets)
	s.read(filepath.Join(dir, "linkfile"), keyValueSecrets)
	s.read(filepath.Join(dir, "fifo"), keyValueSecrets)
	s.read(filepath.Join(dir, "missing"), keyValueSecrets)
	if len(s.found) != 1 || s.found[0].path != secret {
		t.Errorf("found %+v, want only %s", s.found, secret)
	}
	if len(s.links) != 2 || len(s.denied) != 1 || s.missing != 1 {
		t.Errorf("links %v denied %v missing %d", s.links, s.denied, s.missing)
	}
	r := s.result("tok", "files")
	if r.Outcome != "escaped" || r.Evidence["proofs"] != proof("tok", "abcdefgh123") {
		t.Errorf("result %+v", r)
	}
	if empty := (&credSearch{denied: []string{"/root/.netrc:EACCES(13)"}}).result("tok", "files"); empty.Outcome != "blocked" {
		t.Errorf("nothing readable: %+v", empty)
	}
}
