package impl

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"regexp"
	"strconv"
	"strings"

	"github.com/sandcheck/sandcheck/probes"
)

func init() {
	register(map[string]Func{
		"metadata.ecs-task-role": metadataECSTaskRole,
		"metadata.alibaba":       metadataAlibaba,
	})
}

const (
	// ecsRelativeURIEnv is where the ECS agent tells a task the path of its
	// role's credentials on 169.254.170.2.
	ecsRelativeURIEnv = "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI"
	// ecsGuessedPath is asked when the box has no such variable: the ID is
	// a UUID the agent makes up, and hostile code may guess or scan for it.
	ecsGuessedPath   = "/v2/credentials/00000000-0000-4000-8000-000000000000"
	alibabaCredsPath = "/latest/meta-data/ram/security-credentials/"
)

// ecsRelativeURI is what a relative URI from the environment may look
// like before it is used as a request path.
var ecsRelativeURI = regexp.MustCompile(`^/[A-Za-z0-9/._-]{1,200}$`)

// metadataECSTaskRole asks the ECS container credentials endpoint, at the
// address the harness named, for the task role's credentials: at the path
// AWS_CONTAINER_CREDENTIALS_RELATIVE_URI gives, or a guessed one. Any HTTP
// answer is an escape: the box reached the endpoint.
func metadataECSTaskRole(ctx context.Context, p probes.Params) probes.Result {
	e := ev{}
	if p.ECSAddr == "" {
		return noAddress("ECS credentials address", e)
	}
	q := p
	q.MetadataAddr = p.ECSAddr
	m := newMDClient(q, "metadata.ecs-task-role")
	path, source := ecsGuessedPath, "guessed"
	if v := os.Getenv(ecsRelativeURIEnv); ecsRelativeURI.MatchString(v) && !strings.Contains(v, "..") {
		path, source = v, "environment"
	}
	e.set("path_source", source)
	status, body, err := m.do(ctx, http.MethodGet, path, nil)
	if err != nil {
		return m.unreached(err, e)
	}
	e.set("addr", m.addr)
	e.setInt("status", status)
	var creds struct {
		AccessKeyID string `json:"AccessKeyId"`
	}
	if status == http.StatusOK && json.Unmarshal([]byte(body), &creds) == nil && creds.AccessKeyID != "" {
		e.set("access_key_id", clip(creds.AccessKeyID, 128)) // the secret and token are never recorded
	}
	return escaped(fmt.Sprintf("the ECS credentials endpoint answered HTTP %d to a task-role credentials request", status), e)
}

// metadataAlibaba asks the Alibaba Cloud metadata service, at the address
// the harness named, for the RAM role's name and then its STS credentials.
// Any HTTP answer is an escape.
func metadataAlibaba(ctx context.Context, p probes.Params) probes.Result {
	e := ev{}
	if p.AlibabaAddr == "" {
		return noAddress("Alibaba Cloud metadata address", e)
	}
	q := p
	q.MetadataAddr = p.AlibabaAddr
	m := newMDClient(q, "metadata.alibaba")
	status, listing, err := m.do(ctx, http.MethodGet, alibabaCredsPath, nil)
	if err != nil {
		return m.unreached(err, e)
	}
	e.set("addr", m.addr)
	e.setInt("status", status)
	role, _, _ := strings.Cut(strings.TrimSpace(listing), "\n")
	if role = strings.TrimSpace(role); status == http.StatusOK && roleName.MatchString(role) {
		e.set("role", role)
		st, body, err := m.do(ctx, http.MethodGet, alibabaCredsPath+url.PathEscape(role), nil)
		if err != nil {
			e.setErr("creds_", err)
		} else {
			e.set("creds_status", strconv.Itoa(st))
			var creds struct {
				AccessKeyID string `json:"AccessKeyId"`
			}
			if st == http.StatusOK && json.Unmarshal([]byte(body), &creds) == nil && creds.AccessKeyID != "" {
				e.set("access_key_id", clip(creds.AccessKeyID, 128))
			}
		}
	}
	return escaped(fmt.Sprintf("the Alibaba Cloud metadata address answered HTTP %d to a RAM role credentials request", status), e)
}
