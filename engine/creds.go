package engine

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/sandcheck/sandcheck/evidence"
	"github.com/sandcheck/sandcheck/probes"
	"github.com/sandcheck/sandcheck/runners"
)

// The folders the harness plants in every run's own folder. A target mounts
// them with ${SANDCHECK_RUN_DIR}/<name> (see fixtures/targets/weak.yaml).
const (
	// CredHomeDir is a home folder full of honey credentials (cloud CLIs,
	// kubeconfig, docker, netrc, ssh, git, package managers).
	CredHomeDir = "home"
	// ServiceAccountDir holds a Kubernetes service-account token, CA and
	// namespace, as the kubelet mounts them.
	ServiceAccountDir = "serviceaccount"
)

// honeySecret is one honeytoken the harness planted, and for which probe.
type honeySecret struct {
	probe string // the catalog ID whose finding it proves
	what  string // where it was planted, for the evidence
	value string
	// file is the host path of the planted file that holds it; "" for a
	// secret handed over another way (the environment, the holder).
	file string
}

// creds is the run's planted credentials: unique to the run, known only to
// the host, so a probe that proves it read one (see impl.proof) proves the
// box could read the file it was in.
type creds struct {
	// holderToken is the secret the environment holder keeps in its
	// environment (see startHelpers).
	holderToken string
	// scopedKey is the platform's scoped key for this run: a target places
	// it with ${SANDCHECK_SCOPED_KEY} in its environment values.
	scopedKey string
	// saToken is the planted service-account token (ServiceAccountDir).
	saToken string
	// agent is the SSH-agent canary (creds_agent.go).
	agent *agentCanary

	mu      sync.Mutex
	secrets []honeySecret
}

// plantCreds writes the credential home and the service-account folder into
// the run folder. The files are honey: their secrets are random, shaped like
// the real thing, and valid nowhere.
func plantCreds(runDir string) (*creds, error) {
	c := &creds{holderToken: "sca_" + randAlnum(40), scopedKey: "sck_" + randAlnum(40)}
	c.secrets = append(c.secrets, honeySecret{probe: "secrets.scoped-key", what: "the platform's scoped key", value: c.scopedKey})
	c.secrets = append(c.secrets, honeySecret{probe: "secrets.proc-environ", what: "the environment holder's " + holderEnvName, value: c.holderToken})
	home := filepath.Join(runDir, CredHomeDir)
	awsKey := "AKIA" + randUpper(16)
	awsSecret := randAlnum(40)
	gcpRefresh := "1//0g" + randAlnum(60)
	gcpClient := "GOCSPX-" + randAlnum(28)
	azSecret := "eyJ0eXAiOiJKV1QiLCJhbGciOiJSUzI1NiJ9." + randAlnum(48)
	kubeToken := "eyJhbGciOiJSUzI1NiIsImtpZCI6InNhbmRjaGVjayJ9." + randAlnum(64) + "." + randAlnum(43)
	dockerAuth := base64.StdEncoding.EncodeToString([]byte("sandcheck:" + randAlnum(32)))
	netrcPW := randAlnum(32)
	gitPW := "ghp_" + randAlnum(36)
	npmToken := "npm_" + randAlnum(36)
	pypiToken := "pypi-AgEIcHlwaS5vcmc" + randAlnum(60)
	keyBody := base64.StdEncoding.EncodeToString(append([]byte("openssh-key-v1\x00sandcheck-honey"), randBytes(180)...))
	files := []struct {
		rel, text string
		probe     string
		secrets   map[string]string // what -> value
	}{
		{".aws/credentials", "[default]\naws_access_key_id = " + awsKey + "\naws_secret_access_key = " + awsSecret + "\n",
			"secrets.cloud-cli-credentials", map[string]string{"~/.aws/credentials aws_secret_access_key": awsSecret}},
		{".env", "PLATFORM_API_KEY=" + c.scopedKey + "\n", "", nil},
		{".aws/config", "[default]\nregion = us-east-1\noutput = json\n", "", nil},
		{".config/gcloud/application_default_credentials.json",
			fmt.Sprintf(`{"client_id": "764086051850-sandcheck.apps.googleusercontent.com", "client_secret": %q, "refresh_token": %q, "type": "authorized_user"}`+"\n", gcpClient, gcpRefresh),
			"secrets.cloud-cli-credentials", map[string]string{"gcloud client_secret": gcpClient, "gcloud refresh_token": gcpRefresh}},
		{".azure/msal_token_cache.json",
			fmt.Sprintf(`{"AccessToken": {"sandcheck-honey": {"credential_type": "AccessToken", "secret": %q, "home_account_id": "sandcheck"}}}`+"\n", azSecret),
			"secrets.cloud-cli-credentials", map[string]string{"azure MSAL access token": azSecret}},
		{".kube/config", "apiVersion: v1\nkind: Config\nclusters:\n- name: honey\n  cluster:\n    server: https://kubernetes.invalid:6443\ncontexts:\n- name: honey\n  context:\n    cluster: honey\n    user: honey\ncurrent-context: honey\nusers:\n- name: honey\n  user:\n    token: " + kubeToken + "\n",
			"secrets.kubeconfig", map[string]string{"kubeconfig user token": kubeToken}},
		{".docker/config.json", fmt.Sprintf(`{"auths": {"registry.invalid": {"auth": %q}}}`+"\n", dockerAuth),
			"secrets.docker-config", map[string]string{"docker auths auth": dockerAuth}},
		{".netrc", "machine api.invalid login sandcheck password " + netrcPW + "\n",
			"secrets.netrc", map[string]string{".netrc password": netrcPW}},
		{".ssh/id_ed25519", "-----BEGIN OPENSSH PRIVATE KEY-----\n" + wrap(keyBody, 70) + "-----END OPENSSH PRIVATE KEY-----\n",
			"secrets.ssh-keys", map[string]string{"ssh private key id_ed25519": keyBody}},
		{".ssh/id_ed25519.pub", "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIHNhbmRjaGVja2hvbmV5a2V5bm90cmVhbDAwMDAw sandcheck-honey\n", "", nil},
		{".git-credentials", "https://sandcheck:" + gitPW + "@git.invalid\n",
			"secrets.git-credentials", map[string]string{".git-credentials password": gitPW}},
		{".npmrc", "registry=https://registry.npmjs.org/\n//registry.npmjs.org/:_authToken=" + npmToken + "\n",
			"secrets.package-tokens", map[string]string{".npmrc _authToken": npmToken}},
		{".pypirc", "[distutils]\nindex-servers = pypi\n\n[pypi]\nusername = __token__\npassword = " + pypiToken + "\n",
			"secrets.package-tokens", map[string]string{".pypirc password": pypiToken}},
	}
	for _, f := range files {
		if err := writePlanted(home, f.rel, f.text); err != nil {
			return nil, err
		}
		for what, v := range f.secrets {
			c.secrets = append(c.secrets, honeySecret{probe: f.probe, what: what, value: v, file: filepath.Join(home, f.rel)})
		}
	}
	sa := filepath.Join(runDir, ServiceAccountDir)
	saToken := "eyJhbGciOiJSUzI1NiIsImtpZCI6InNhbmRjaGVjay1zYSJ9." + randAlnum(120) + "." + randAlnum(86)
	for rel, text := range map[string]string{"token": saToken, "namespace": "sandcheck", "ca.crt": "-----BEGIN CERTIFICATE-----\nc2FuZGNoZWNrIGhvbmV5IENBLCBub3QgYSBjZXJ0aWZpY2F0ZQ==\n-----END CERTIFICATE-----\n"} {
		if err := writePlanted(sa, rel, text); err != nil {
			return nil, err
		}
	}
	c.secrets = append(c.secrets, honeySecret{probe: "metadata.k8s-service-account", what: "service-account token", value: saToken, file: filepath.Join(sa, "token")})
	c.saToken = saToken
	return c, nil
}

// kubeTokens are the planted service-account tokens the harness's
// Kubernetes API canary accepts.
func (c *creds) kubeTokens() []string {
	if c == nil || c.saToken == "" {
		return nil
	}
	return []string{c.saToken}
}

// writePlanted writes one honey file, creating its folders; it never
// overwrites (the run folder is fresh).
func writePlanted(dir, rel, text string) error {
	p := filepath.Join(dir, rel)
	if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
		return fmt.Errorf("planting credential folder %s: %w", filepath.Dir(p), err)
	}
	f, err := os.OpenFile(p, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if err != nil {
		return fmt.Errorf("planting credential file: %w", err)
	}
	if _, err := f.WriteString(text); err != nil {
		f.Close()
		return fmt.Errorf("planting credential file %s: %w", p, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("planting credential file %s: %w", p, err)
	}
	return nil
}

// add registers one more honeytoken (the scoped key, a holder's token).
func (c *creds) add(probe, what, value string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.secrets = append(c.secrets, honeySecret{probe: probe, what: what, value: value})
}

// proof is what impl.proof computes inside the box: the first 16 hex digits
// of sha256(token ":" value).
func proof(token, value string) string {
	sum := sha256.Sum256([]byte(token + ":" + value))
	return hex.EncodeToString(sum[:])[:16]
}

// check joins the proofs a probe reported (space-separated, from inside the
// box) with the honeytokens planted for that probe under the invocation's
// token: a match is host evidence that the planted secret was read.
func (c *creds) check(probe, token, reported string) (evidence.Item, bool) {
	if c == nil {
		return evidence.Item{}, false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	var planted []honeySecret
	for _, s := range c.secrets {
		if s.probe == probe {
			planted = append(planted, s)
		}
	}
	if len(planted) == 0 {
		return evidence.Item{}, false
	}
	got := map[string]bool{}
	for i, p := range strings.Fields(reported) {
		if i >= 32 {
			break
		}
		got[p] = true
	}
	var read []string
	for _, s := range planted {
		if got[proof(token, s.value)] {
			read = append(read, s.what)
		}
	}
	it := evidence.Item{Source: evidence.SourceCanary, Kind: "honeytoken"}
	if len(read) == 0 {
		it.Summary = fmt.Sprintf("none of the %d honeytoken(s) the harness planted for this probe was proved read", len(planted))
		return it, true
	}
	it.Indicates = probes.Escaped
	it.Summary = truncate("the probe proved it read honeytoken(s) the harness planted for this run: "+strings.Join(read, ", "), 300)
	it.Data = map[string]string{"read": fmt.Sprint(len(read)), "planted": fmt.Sprint(len(planted))}
	return it, true
}

const alnum = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"

func randBytes(n int) []byte {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return b
}

func randFrom(chars string, n int) string {
	b := randBytes(n)
	for i := range b {
		b[i] = chars[int(b[i])%len(chars)]
	}
	return string(b)
}

func randAlnum(n int) string { return randFrom(alnum, n) }
func randUpper(n int) string { return randFrom(alnum[:26]+alnum[52:], n) }

// wrap cuts s into lines of n characters, each ending in a newline.
func wrap(s string, n int) string {
	var b strings.Builder
	for len(s) > n {
		b.WriteString(s[:n] + "\n")
		s = s[n:]
	}
	if s != "" {
		b.WriteString(s + "\n")
	}
	return b.String()
}

// The environment holder: a process the harness starts as root inside a
// probe's sandbox with a honeytoken in its environment, the way a platform
// agent or a supervisor holds its key beside the task. Specs that need it
// name host evidence "environ-holder".
const (
	environHolderHost = "environ-holder"
	holderEnvName     = "SANDCHECK_PLATFORM_AGENT_TOKEN"
	holderUser        = "0"
	holderLife        = 2 * time.Minute
)

// spawner is implemented by sandboxes that can start a helper process beside
// a probe without waiting for it (runners/docker).
type spawner interface {
	Spawn(ctx context.Context, argv []string, user string, env []string) error
}

// startHelpers starts what the given probes need running beside them in
// sandbox s before they run.
func (e *Engine) startHelpers(ctx context.Context, s *sandbox, specs []probes.Spec) error {
	if !slices.ContainsFunc(specs, func(sp probes.Spec) bool { return slices.Contains(sp.Host, environHolderHost) }) {
		return nil
	}
	if e.target.AgentMode() == "none" {
		return nil // the platform keeps no process in the box: nothing to hold a key
	}
	sp, ok := s.sb.(spawner)
	if !ok {
		return fmt.Errorf("runner %s cannot start the environment holder beside a probe", e.runner.Name())
	}
	argv := []string{runners.ProbeMount + "/" + runners.ProbeBinary, "hold", "--max", holderLife.String()}
	if err := sp.Spawn(ctx, argv, holderUser, []string{holderEnvName + "=" + e.creds.holderToken}); err != nil {
		return fmt.Errorf("starting the environment holder: %w", err)
	}
	return nil
}

// ScopedKeyVar is what a target writes in an environment value to place the
// run's scoped key there (docker.env: {PLATFORM_API_KEY: "${SANDCHECK_SCOPED_KEY}"}).
const ScopedKeyVar = "${SANDCHECK_SCOPED_KEY}"

// expandEnv returns a copy of env with the scoped key in place of
// ScopedKeyVar.
func (c *creds) expandEnv(env map[string]string) map[string]string {
	if env == nil {
		return nil
	}
	out := make(map[string]string, len(env))
	for k, v := range env {
		out[k] = c.expand(v)
	}
	return out
}

// expand puts the scoped key in place of ScopedKeyVar in one value.
func (c *creds) expand(v string) string { return strings.ReplaceAll(v, ScopedKeyVar, c.scopedKey) }

// scopedKeySHA256 is what the probe is told: the key's hash, not the key.
func (c *creds) scopedKeySHA256() string {
	sum := sha256.Sum256([]byte(c.scopedKey))
	return hex.EncodeToString(sum[:])
}
