package opensandbox

// The rules upstream states only in a description or enforces only in its
// server's code, which no schema validator sees. Each is written here from
// the upstream text it cites, not from the runner's own checks (labels.go),
// so a shared misreading does not pass both.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/url"
	"regexp"
	"sort"
	"strings"
)

// Upstream's Kubernetes label rules, verbatim from server
// services/validators.py 54-57.
var (
	upDNSSubdomain = regexp.MustCompile(`^(?:[a-z0-9]([-a-z0-9]*[a-z0-9])?\.)*[a-z0-9]([-a-z0-9]*[a-z0-9])?$`)
	upLabelName    = regexp.MustCompile(`^[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$`)
	upLabelValue   = regexp.MustCompile(`^([A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?)?$`)
)

// upLabelKeyValid is services/validators.py 71-88: an optional DNS-subdomain
// prefix (≤ 253) and '/', then a name of ≤ 63 characters.
func upLabelKeyValid(key string) bool {
	name := key
	if i := strings.Index(key, "/"); i >= 0 {
		prefix := key[:i]
		name = key[i+1:]
		if prefix == "" || len(prefix) > 253 || !upDNSSubdomain.MatchString(prefix) {
			return false
		}
	}
	return name != "" && len(name) <= 63 && upLabelName.MatchString(name)
}

// createRules judges POST /sandboxes' body beyond its schema.
func createRules(body []byte) []string {
	var req map[string]json.RawMessage
	if err := json.Unmarshal(body, &req); err != nil {
		return []string{fmt.Sprintf("create body is not a JSON object: %v", err)}
	}
	var probs []string
	var ext map[string]string
	_ = json.Unmarshal(req["extensions"], &ext)
	_, pool := ext["poolRef"]
	// "Standard mode: Exactly one of image or snapshotId must be provided,
	// and resourceLimits is required" (sandbox-lifecycle.yml 1162-1163,
	// 1214); upstream answers 422 without it (server api/schema.py 519-520).
	if !pool {
		if present(req, "resourceLimits") == 0 {
			probs = append(probs, "no resourceLimits outside pool mode (sandbox-lifecycle.yml 1162-1163, 1214; server api/schema.py 519-520)")
		}
		if present(req, "image")+present(req, "snapshotId") != 1 {
			probs = append(probs, "not exactly one of image and snapshotId (sandbox-lifecycle.yml 1162)")
		}
	}
	// "When image is provided, entrypoint is required" (sandbox-lifecycle.yml
	// 1165; server api/schema.py 510-511).
	if present(req, "image") == 1 && present(req, "entrypoint") == 0 {
		probs = append(probs, "an image without an entrypoint (sandbox-lifecycle.yml 1165)")
	}
	// A null timeout disables expiry, which "Kubernetes providers may
	// reject" (sandbox-lifecycle.yml 1206-1208; server api/schema.py
	// 413-421): the runner omits it instead (issue 27).
	if t, ok := req["timeout"]; ok && bytes.Equal(bytes.TrimSpace(t), []byte("null")) {
		probs = append(probs, `"timeout": null, which Kubernetes providers may refuse: omit it (sandbox-lifecycle.yml 1206-1208; server api/schema.py 413-421)`)
	}
	// Metadata keys and values are Kubernetes labels, the opensandbox.io/
	// prefix reserved: a 400 otherwise (server services/validators.py
	// 97-131).
	var md map[string]string
	if err := json.Unmarshal(req["metadata"], &md); err == nil {
		keys := make([]string, 0, len(md))
		for k := range md {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			v := md[k]
			switch {
			case strings.HasPrefix(k, "opensandbox.io/"):
				probs = append(probs, fmt.Sprintf("metadata key %q uses the reserved opensandbox.io/ prefix (server services/validators.py 107-117)", k))
			case !upLabelKeyValid(k):
				probs = append(probs, fmt.Sprintf("metadata key %q is not a Kubernetes label key (server services/validators.py 118-125)", k))
			}
			if len(v) > 63 || !upLabelValue.MatchString(v) {
				probs = append(probs, fmt.Sprintf("metadata value %q (%d characters) of %q is not a Kubernetes label value (server services/validators.py 91-94, 126-133)", v, len(v), k))
			}
		}
	}
	return probs
}

// present is 1 when key is in the object with a non-null value.
func present(obj map[string]json.RawMessage, key string) int {
	v, ok := obj[key]
	if !ok || bytes.Equal(bytes.TrimSpace(v), []byte("null")) {
		return 0
	}
	return 1
}

// listRules: GET /sandboxes' metadata filter is k=v pairs, URL-encoded
// inside the parameter ("keys and values must be url encoded",
// sandbox-lifecycle.yml 72-73), which upstream parses with
// parse_qsl(strict_parsing=True) and refuses with 400 otherwise (server
// api/lifecycle.py 137-150).
func listRules(q url.Values) []string {
	md := q.Get("metadata")
	if md == "" {
		return nil
	}
	var probs []string
	for _, pair := range strings.Split(md, "&") {
		k, v, ok := strings.Cut(pair, "=")
		if !ok || k == "" {
			probs = append(probs, fmt.Sprintf("metadata filter %q is not k=v pairs", md))
			continue
		}
		if _, err := url.QueryUnescape(k); err != nil {
			probs = append(probs, fmt.Sprintf("metadata filter key %q: %v", k, err))
		}
		if _, err := url.QueryUnescape(v); err != nil {
			probs = append(probs, fmt.Sprintf("metadata filter value %q: %v", v, err))
		}
	}
	return probs
}

// commandRules: "If gid is provided, uid is required" (execd-api.yaml 1234,
// 1241).
func commandRules(body []byte) []string {
	var req map[string]json.RawMessage
	if err := json.Unmarshal(body, &req); err != nil {
		return []string{fmt.Sprintf("command body is not a JSON object: %v", err)}
	}
	if present(req, "gid") == 1 && present(req, "uid") == 0 {
		return []string{"gid without uid (execd-api.yaml 1234, 1241)"}
	}
	return nil
}
