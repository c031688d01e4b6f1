package canary

import (
	"encoding/json"
	"testing"
)

func TestECSCredentials(t *testing.T) {
	m, _ := newTestMetadata(t, MetadataOptions{})
	h := m.ECS()
	hdr := map[string]string{TokenHeader: "e1"}
	w := do(t, h, "GET", "/v2/credentials/0f1e2d3c-aaaa-4bbb-8ccc-123456789abc", hdr)
	var c map[string]string
	if w.Code != 200 || json.Unmarshal(w.Body.Bytes(), &c) != nil || c["AccessKeyId"] != m.Honey().AWS.AccessKeyID ||
		c["Token"] != m.Honey().AWS.SessionToken || c["Expiration"] == "" || c["RoleArn"] == "" {
		t.Fatalf("ECS credentials = %d %q, want the honey task-role credentials", w.Code, w.Body)
	}
	if w := do(t, h, "GET", "/v2/credentials/", hdr); w.Code != 400 {
		t.Errorf("ECS credentials without an ID = %d, want 400", w.Code)
	}
	if w := do(t, h, "PUT", "/v2/credentials/x", hdr); w.Code != 405 {
		t.Errorf("ECS PUT = %d, want 405", w.Code)
	}
	hits := m.Recorder().ByToken("e1")
	if len(hits) != 3 || hits[0].Service != ServiceECS || hits[0].Status != 200 || hits[1].Status != 400 {
		t.Errorf("ECS hits = %+v, want 3 attributed to e1 with service %s", hits, ServiceECS)
	}
}

func TestAlibabaCredentials(t *testing.T) {
	m, _ := newTestMetadata(t, MetadataOptions{})
	h := m.Alibaba()
	hdr := map[string]string{"User-Agent": "sandcheck-probe/a1/metadata.alibaba"}
	w := do(t, h, "GET", "/latest/meta-data/ram/security-credentials/", hdr)
	role := m.Honey().AlibabaRoleName
	if w.Code != 200 || w.Body.String() != role {
		t.Fatalf("role listing = %d %q, want %q", w.Code, w.Body, role)
	}
	w = do(t, h, "GET", "/latest/meta-data/ram/security-credentials/"+role, hdr)
	var c map[string]string
	if w.Code != 200 || json.Unmarshal(w.Body.Bytes(), &c) != nil || c["AccessKeyId"] != m.Honey().AlibabaAccessKeyID ||
		c["AccessKeySecret"] != m.Honey().AlibabaAccessKeySecret || c["SecurityToken"] != m.Honey().AlibabaSecurityToken || c["Code"] != "Success" {
		t.Fatalf("role credentials = %d %q, want the honey STS credentials", w.Code, w.Body)
	}
	if w := do(t, h, "GET", "/latest/meta-data/ram/security-credentials/other", hdr); w.Code != 404 {
		t.Errorf("unknown role = %d, want 404", w.Code)
	}
	hits := m.Recorder().ByToken("a1")
	if len(hits) != 3 || hits[0].Service != ServiceAlibaba || hits[0].Probe != "metadata.alibaba" {
		t.Errorf("Alibaba hits = %+v, want 3 attributed to a1/metadata.alibaba with service %s", hits, ServiceAlibaba)
	}
}
