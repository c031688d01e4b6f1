package impl

import (
	"context"
	"encoding/json"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/sandcheck/sandcheck/probes"
)

// The credential-file probes: one per family of files that tools leave in a
// home folder. Each looks in every home folder (homeFolders) and at the paths
// the tools' own variables name, reads bounded and never through a link, and
// reports how many secrets it could read, with a proof of each (see proof)
// for the harness to join with the honeytokens it planted.
func init() {
	register(map[string]Func{
		"secrets.cloud-cli-credentials": credProbe("cloud CLI credential file(s)", cloudCLIFiles),
		"secrets.kubeconfig":            credProbe("kubeconfig file(s)", kubeconfigFiles),
		"secrets.docker-config":         credProbe("docker config file(s)", dockerConfigFiles),
		"secrets.netrc":                 credProbe(".netrc file(s)", netrcFiles),
		"secrets.ssh-keys":              credProbe("SSH private key file(s)", sshKeyFiles),
		"secrets.git-credentials":       credProbe("git credential file(s)", gitCredentialFiles),
		"secrets.package-tokens":        credProbe("package-manager token file(s)", packageTokenFiles),
	})
}

// credFile is one file to try and how to read its secrets.
type credFile struct {
	path  string
	parse func([]byte) []string
}

// credProbe builds a credential-file probe from the files it tries.
func credProbe(what string, files func(homes []string) []credFile) Func {
	return func(ctx context.Context, p probes.Params) probes.Result {
		s := &credSearch{}
		seen := map[string]bool{}
		for _, f := range files(homeFolders()) {
			if ctx.Err() != nil {
				break
			}
			if !filepath.IsAbs(f.path) || seen[filepath.Clean(f.path)] {
				continue
			}
			seen[filepath.Clean(f.path)] = true
			s.read(filepath.Clean(f.path), f.parse)
		}
		return s.result(p.Token, what)
	}
}

// inHomes joins each relative path to each home.
func inHomes(homes []string, parse func([]byte) []string, rels ...string) []credFile {
	var out []credFile
	for _, h := range homes {
		for _, r := range rels {
			out = append(out, credFile{filepath.Join(h, r), parse})
		}
	}
	return out
}

// fromEnv names the file an environment variable points at, if absolute.
func fromEnv(name string, parse func([]byte) []string, suffix string) []credFile {
	v := os.Getenv(name)
	if v == "" || !filepath.IsAbs(v) {
		return nil
	}
	return []credFile{{filepath.Join(v, suffix), parse}}
}

func cloudCLIFiles(homes []string) []credFile {
	out := inHomes(homes, keyValueSecrets, ".aws/credentials", ".aws/config")
	out = append(out, inHomes(homes, jsonSecrets,
		".config/gcloud/application_default_credentials.json",
		".azure/msal_token_cache.json", ".azure/accessTokens.json", ".azure/service_principal_entries.json")...)
	out = append(out, fromEnv("AWS_SHARED_CREDENTIALS_FILE", keyValueSecrets, "")...)
	return append(out, fromEnv("GOOGLE_APPLICATION_CREDENTIALS", jsonSecrets, "")...)
}

func kubeconfigFiles(homes []string) []credFile {
	out := inHomes(homes, keyValueSecrets, ".kube/config")
	for i, p := range strings.Split(os.Getenv("KUBECONFIG"), ":") {
		if i >= 4 {
			break
		}
		if filepath.IsAbs(p) {
			out = append(out, credFile{p, keyValueSecrets})
		}
	}
	return out
}

func dockerConfigFiles(homes []string) []credFile {
	out := inHomes(homes, jsonSecrets, ".docker/config.json")
	return append(out, fromEnv("DOCKER_CONFIG", jsonSecrets, "config.json")...)
}

func netrcFiles(homes []string) []credFile {
	out := inHomes(homes, netrcSecrets, ".netrc", "_netrc")
	return append(out, fromEnv("NETRC", netrcSecrets, "")...)
}

func gitCredentialFiles(homes []string) []credFile {
	return inHomes(homes, urlSecrets, ".git-credentials", ".config/git/credentials")
}

func packageTokenFiles(homes []string) []credFile {
	return inHomes(homes, keyValueSecrets, ".npmrc", ".pypirc", ".yarnrc.yml", ".gem/credentials",
		".cargo/credentials.toml", ".cargo/credentials", ".config/pip/pip.conf", ".pip/pip.conf")
}

// sshKeyFiles lists every regular file in each home's .ssh folder except
// public keys and known_hosts: private keys have any name.
func sshKeyFiles(homes []string) []credFile {
	var out []credFile
	for _, h := range homes {
		dir := filepath.Join(h, ".ssh")
		names, err := listNoFollow(dir, false)
		if err != nil {
			// Tried as a file, so a refused folder is recorded as refused.
			out = append(out, credFile{filepath.Join(dir, "id_ed25519"), pemBodies})
			continue
		}
		for _, n := range names {
			if strings.HasSuffix(n, ".pub") || strings.HasPrefix(n, "known_hosts") || n == "authorized_keys" || n == "config" {
				continue
			}
			out = append(out, credFile{filepath.Join(dir, n), pemBodies})
		}
	}
	return out
}

var (
	// secretKey matches the names configuration files give secrets.
	secretKey = regexp.MustCompile(`(?i)(secret|token|password|passwd|_auth$|^auth$|api_?key|client-key-data|private_?key)`)
	// notSecretKey matches names that only point at a secret or describe it.
	notSecretKey = regexp.MustCompile(`(?i)(uri|url|file|path|type|expir|helper|command|cmd|_id)$`)
)

// secretValue says whether a value under a secret-sounding key is one: long
// enough, no blanks, not a link to somewhere else.
func secretValue(v string) bool {
	return len(v) >= 8 && !strings.ContainsAny(v, " \t") && !strings.Contains(v, "://")
}

// keyValueSecrets reads "key = value" and "key: value" lines (INI, npmrc,
// TOML, the YAML of kubeconfig and gem credentials) and keeps the values
// under secret-sounding keys.
func keyValueSecrets(b []byte) []string {
	var out []string
	for _, l := range strings.Split(string(b), "\n") {
		l = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(l), "- "))
		if l == "" || l[0] == '#' || l[0] == ';' || l[0] == '[' {
			continue
		}
		i, sep := strings.IndexByte(l, '='), 1
		if j := strings.Index(l, ": "); j >= 0 && (i < 0 || j < i) {
			i, sep = j, 2
		}
		if i < 0 {
			continue
		}
		k, v := strings.TrimSpace(l[:i]), trimValue(l[i+sep:])
		if secretKey.MatchString(k) && !notSecretKey.MatchString(k) && secretValue(v) {
			out = append(out, v)
		}
	}
	return out
}

// jsonSecrets keeps the string values under secret-sounding keys anywhere in
// a JSON document (docker's auths.*.auth, gcloud's refresh_token, MSAL's
// secret), at most 16 levels deep.
func jsonSecrets(b []byte) []string {
	var doc any
	if json.Unmarshal(b, &doc) != nil {
		return nil
	}
	var out []string
	var walk func(v any, key string, depth int)
	walk = func(v any, key string, depth int) {
		if depth > 16 {
			return
		}
		switch t := v.(type) {
		case map[string]any:
			for k, c := range t {
				walk(c, k, depth+1)
			}
		case []any:
			for _, c := range t {
				walk(c, key, depth+1)
			}
		case string:
			if key != "" && secretKey.MatchString(key) && !notSecretKey.MatchString(key) && secretValue(t) {
				out = append(out, t)
			}
		}
	}
	walk(doc, "", 0)
	return out
}

// netrcSecrets keeps the value after each "password" token.
func netrcSecrets(b []byte) []string {
	var out []string
	f := strings.Fields(string(b))
	for i := 0; i+1 < len(f); i++ {
		if f[i] == "password" {
			out = append(out, f[i+1])
			i++
		}
	}
	return out
}

// urlSecrets keeps the password of each "scheme://user:password@host" line.
func urlSecrets(b []byte) []string {
	var out []string
	for _, l := range strings.Split(string(b), "\n") {
		u, err := url.Parse(strings.TrimSpace(l))
		if err != nil || u.User == nil {
			continue
		}
		if pw, ok := u.User.Password(); ok && pw != "" {
			out = append(out, pw)
		}
	}
	return out
}
