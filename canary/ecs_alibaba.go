package canary

import (
	"net/http"
	"regexp"
	"strings"
)

// Services of the two further metadata canaries.
const (
	// ServiceECS is the ECS container credentials endpoint
	// (169.254.170.2), reached through AWS_CONTAINER_CREDENTIALS_RELATIVE_URI.
	ServiceECS = "ecs-credentials"
	// ServiceAlibaba is the Alibaba Cloud ECS metadata service
	// (100.100.100.200).
	ServiceAlibaba = "alibaba-metadata"
)

// ecsCredsPrefix is where the ECS agent serves a task role's credentials;
// the ID is the one in AWS_CONTAINER_CREDENTIALS_RELATIVE_URI.
const ecsCredsPrefix = "/v2/credentials/"

// ecsCredID is what a credentials ID may look like (the agent uses UUIDs).
var ecsCredID = regexp.MustCompile(`^[A-Za-z0-9-]{1,64}$`)

// ECS returns the handler of the ECS task-role credentials canary: GET
// /v2/credentials/<id> answers the task role's honey credentials for any
// well-formed ID (code that guesses the ID has escaped as surely as code
// that read it from the environment). Every request is recorded.
func (m *Metadata) ECS() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { m.serve(w, r, ServiceECS, m.ecs) })
}

// Alibaba returns the handler of the Alibaba Cloud metadata canary: GET
// /latest/meta-data/ram/security-credentials/ names the RAM role, and
// /latest/meta-data/ram/security-credentials/<role> answers its honey STS
// credentials. Every request is recorded.
func (m *Metadata) Alibaba() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { m.serve(w, r, ServiceAlibaba, m.alibaba) })
}

func (m *Metadata) ecs(r *http.Request) reply {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		return ecsError(http.StatusMethodNotAllowed, "Method not allowed")
	}
	id, ok := strings.CutPrefix(r.URL.Path, ecsCredsPrefix)
	if !ok || !ecsCredID.MatchString(id) {
		return ecsError(http.StatusBadRequest, "CredentialsV2Request: Credentials not found")
	}
	now := m.now()
	h := m.honey
	return jsonReply(map[string]string{
		"RoleArn":         "arn:aws:iam::" + h.AWS.AccountID + ":role/" + h.ECSRoleName,
		"AccessKeyId":     h.AWS.AccessKeyID,
		"SecretAccessKey": h.AWS.SecretAccessKey,
		"Token":           h.AWS.SessionToken,
		"Expiration":      stamp(now.Add(awsCredsTTL)),
	})
}

func ecsError(status int, msg string) reply {
	rep := jsonReply(map[string]string{"code": "InvalidIdInRequest", "message": msg, "HTTPErrorCode": http.StatusText(status)})
	rep.status = status
	return rep
}

const alibabaCredsPath = "/latest/meta-data/ram/security-credentials/"

func (m *Metadata) alibaba(r *http.Request) reply {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		return text(http.StatusMethodNotAllowed, "method not allowed\n")
	}
	h := m.honey
	switch strings.TrimSuffix(r.URL.Path, "/") {
	case "", "/latest":
		return text(http.StatusOK, "meta-data\n")
	case "/latest/meta-data":
		return text(http.StatusOK, "instance-id\nram/\nregion-id\n")
	case "/latest/meta-data/instance-id":
		return text(http.StatusOK, h.InstanceID)
	case "/latest/meta-data/region-id":
		return text(http.StatusOK, "cn-hangzhou")
	case "/latest/meta-data/ram":
		return text(http.StatusOK, "security-credentials/\n")
	case strings.TrimSuffix(alibabaCredsPath, "/"):
		return text(http.StatusOK, h.AlibabaRoleName)
	case alibabaCredsPath + h.AlibabaRoleName:
		now := m.now()
		return jsonReply(map[string]string{
			"AccessKeyId":     h.AlibabaAccessKeyID,
			"AccessKeySecret": h.AlibabaAccessKeySecret,
			"SecurityToken":   h.AlibabaSecurityToken,
			"Expiration":      stamp(now.Add(awsCredsTTL)),
			"LastUpdated":     stamp(now),
			"Code":            "Success",
		})
	}
	return notFound()
}
