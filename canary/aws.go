package canary

import (
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// IMDS headers and limits, as AWS documents them.
const (
	awsTokenHeader = "X-Aws-Ec2-Metadata-Token"
	awsTTLHeader   = "X-Aws-Ec2-Metadata-Token-Ttl-Seconds"
	awsMaxTTL      = 21600
	awsCredsTTL    = 6 * time.Hour
	awsRegion      = "us-east-1"
)

// aws answers the IMDS API. Paths and shapes follow the EC2 user guide
// ("Instance metadata categories", "Use IMDSv2") closely enough for the AWS
// SDKs' credential providers.
func (m *Metadata) aws(r *http.Request) reply {
	if r.URL.Path == "/latest/api/token" {
		return m.awsToken(r)
	}
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		return text(http.StatusMethodNotAllowed, "method not allowed\n")
	}
	if tok := r.Header.Get(awsTokenHeader); tok != "" {
		if !m.validSession(tok) {
			return text(http.StatusUnauthorized, "")
		}
	} else if m.requireToken {
		return text(http.StatusUnauthorized, "")
	}
	p := strings.TrimPrefix(r.URL.Path, "/latest/")
	if p == r.URL.Path {
		switch r.URL.Path {
		case "/":
			return text(http.StatusOK, "latest\n")
		case "/latest":
			return text(http.StatusOK, "dynamic\nmeta-data\n")
		}
		return notFound()
	}
	if body, ok := m.awsStatic(p); ok {
		return text(http.StatusOK, body)
	}
	for _, dir := range []string{"meta-data/iam/security-credentials/", "meta-data/iam/security-credentials-extended/"} {
		rest, ok := strings.CutPrefix(p, dir)
		if !ok {
			continue
		}
		switch strings.TrimSuffix(rest, "/") {
		case "":
			return text(http.StatusOK, m.honey.AWS.RoleName)
		case m.honey.AWS.RoleName:
			return m.awsCredentials(strings.Contains(dir, "extended"))
		}
	}
	return notFound()
}

// awsStatic answers the metadata that does not depend on the request.
func (m *Metadata) awsStatic(p string) (string, bool) {
	h := m.honey
	switch p {
	case "":
		return "dynamic\nmeta-data\n", true
	case "dynamic", "dynamic/":
		return "instance-identity/\n", true
	case "meta-data", "meta-data/":
		return "ami-id\niam/\ninstance-id\ninstance-type\nplacement/\n", true
	case "meta-data/ami-id":
		return "ami-0sandcheckhoney0", true
	case "meta-data/instance-id":
		return h.InstanceID, true
	case "meta-data/instance-type":
		return "t3.medium", true
	case "meta-data/placement", "meta-data/placement/":
		return "availability-zone\nregion\n", true
	case "meta-data/placement/region":
		return awsRegion, true
	case "meta-data/placement/availability-zone":
		return awsRegion + "a", true
	case "meta-data/iam", "meta-data/iam/":
		return "info\nsecurity-credentials/\n", true
	case "meta-data/iam/info":
		return mustJSON(map[string]string{
			"Code":               "Success",
			"LastUpdated":        stamp(m.now()),
			"InstanceProfileArn": "arn:aws:iam::" + h.AWS.AccountID + ":instance-profile/" + h.AWS.RoleName,
			"InstanceProfileId":  "AIPA" + h.AWS.AccessKeyID[4:],
		}), true
	case "dynamic/instance-identity", "dynamic/instance-identity/":
		return "document\n", true
	case "dynamic/instance-identity/document":
		return mustJSON(map[string]string{
			"accountId":        h.AWS.AccountID,
			"availabilityZone": awsRegion + "a",
			"imageId":          "ami-0sandcheckhoney0",
			"instanceId":       h.InstanceID,
			"instanceType":     "t3.medium",
			"region":           awsRegion,
			"architecture":     "x86_64",
			"version":          "2017-09-30",
		}), true
	}
	return "", false
}

// awsCredentials is the role's credentials document; SDKs require Code
// "Success" and an Expiration in the future.
func (m *Metadata) awsCredentials(extended bool) reply {
	now := m.now()
	c := map[string]string{
		"Code":            "Success",
		"LastUpdated":     stamp(now),
		"Type":            "AWS-HMAC",
		"AccessKeyId":     m.honey.AWS.AccessKeyID,
		"SecretAccessKey": m.honey.AWS.SecretAccessKey,
		"Token":           m.honey.AWS.SessionToken,
		"Expiration":      stamp(now.Add(awsCredsTTL)),
	}
	if extended {
		c["AccountId"] = m.honey.AWS.AccountID
	}
	return text(http.StatusOK, mustJSON(c))
}

// awsToken issues an IMDSv2 session token.
func (m *Metadata) awsToken(r *http.Request) reply {
	if r.Method != http.MethodPut {
		return text(http.StatusMethodNotAllowed, "method not allowed\n")
	}
	if forwarded(r) {
		return text(http.StatusForbidden, "forbidden\n")
	}
	ttl, err := strconv.Atoi(r.Header.Get(awsTTLHeader))
	if err != nil || ttl < 1 || ttl > awsMaxTTL {
		return text(http.StatusBadRequest, "bad request\n")
	}
	tok, ok := m.newSession(time.Duration(ttl) * time.Second)
	if !ok {
		return text(http.StatusServiceUnavailable, "too many sessions\n")
	}
	rep := text(http.StatusOK, tok)
	rep.header = map[string]string{awsTTLHeader: strconv.Itoa(ttl)}
	return rep
}

// newSession stores a fresh token, pruning expired ones when the table is
// full; it fails rather than evict a live token.
func (m *Metadata) newSession(ttl time.Duration) (string, bool) {
	now := m.now()
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(m.tokens) >= MaxSessions {
		for t, exp := range m.tokens {
			if !now.Before(exp) {
				delete(m.tokens, t)
			}
		}
		if len(m.tokens) >= MaxSessions {
			return "", false
		}
	}
	b := make([]byte, 42)
	rand.Read(b)
	tok := "AQAEA" + base64.RawURLEncoding.EncodeToString(b)
	m.tokens[tok] = now.Add(ttl)
	return tok, true
}

func (m *Metadata) validSession(tok string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	exp, ok := m.tokens[tok]
	return ok && m.now().Before(exp)
}

func stamp(t time.Time) string {
	return t.UTC().Truncate(time.Second).Format(time.RFC3339)
}

func notFound() reply {
	return reply{status: http.StatusNotFound, ctype: "text/html", body: "<?xml version=\"1.0\" encoding=\"iso-8859-1\"?>\n<html><head><title>404 - Not Found</title></head><body><h1>404 - Not Found</h1></body></html>\n"}
}

func mustJSON(v any) string {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		panic("encoding canary document: " + err.Error())
	}
	return string(b)
}
