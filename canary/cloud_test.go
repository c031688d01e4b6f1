package canary

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestGCPMetadata(t *testing.T) {
	m, _ := newTestMetadata(t, MetadataOptions{})
	const tokenPath = "/computeMetadata/v1/instance/service-accounts/default/token"
	if w := do(t, m, "GET", tokenPath, nil); w.Code != 403 {
		t.Errorf("GCP token without Metadata-Flavor = %d, want 403", w.Code)
	}
	flavor := map[string]string{"Metadata-Flavor": "Google", TokenHeader: "g1"}
	w := do(t, m, "GET", tokenPath, flavor)
	var tok struct {
		AccessToken string `json:"access_token"`
		ExpiresIn   int    `json:"expires_in"`
		TokenType   string `json:"token_type"`
	}
	if w.Code != 200 || json.Unmarshal(w.Body.Bytes(), &tok) != nil || tok.AccessToken != m.Honey().GCPAccessToken || tok.TokenType != "Bearer" {
		t.Fatalf("GCP token = %d %q, want the honey access token", w.Code, w.Body)
	}
	if got := w.Header().Get("Metadata-Flavor"); got != "Google" {
		t.Errorf("response Metadata-Flavor = %q, want Google (client libraries detect GCE by it)", got)
	}
	// Client libraries detect GCE by GET / with the flavor header.
	if w := do(t, m, "GET", "/", flavor); w.Code != 200 || w.Header().Get("Metadata-Flavor") != "Google" {
		t.Errorf("GCE detection request = %d, flavor %q", w.Code, w.Header().Get("Metadata-Flavor"))
	}
	if w := do(t, m, "GET", "/computeMetadata/v1/project/project-id", flavor); w.Body.String() != m.Honey().GCPProject {
		t.Errorf("project-id = %q, want %q", w.Body, m.Honey().GCPProject)
	}
	if w := do(t, m, "GET", "/computeMetadata/v1/instance/service-accounts/default/identity?audience=x", flavor); w.Body.String() != m.Honey().GCPIdentityToken {
		t.Errorf("identity = %d %q, want the honey identity token", w.Code, w.Body)
	}
	hits := m.Recorder().ByToken("g1")
	if len(hits) != 4 || hits[0].Service != ServiceGCP {
		t.Errorf("GCP hits = %+v, want 4 attributed to g1 with service %s", hits, ServiceGCP)
	}
}

func TestAzureMetadata(t *testing.T) {
	m, _ := newTestMetadata(t, MetadataOptions{})
	const path = "/metadata/identity/oauth2/token?api-version=2018-02-01&resource=https%3A%2F%2Fmanagement.azure.com%2F"
	if w := do(t, m, "GET", path, nil); w.Code != 400 {
		t.Errorf("Azure token without Metadata: true = %d, want 400", w.Code)
	}
	hdr := map[string]string{"Metadata": "true"}
	if w := do(t, m, "GET", "/metadata/identity/oauth2/token?resource=x", hdr); w.Code != 400 || !strings.Contains(w.Body.String(), "api-version") {
		t.Errorf("Azure token without api-version = %d %q, want 400 naming api-version", w.Code, w.Body)
	}
	w := do(t, m, "GET", path, hdr)
	var tok map[string]string
	if w.Code != 200 || json.Unmarshal(w.Body.Bytes(), &tok) != nil || tok["access_token"] != m.Honey().AzureAccessToken || tok["resource"] != "https://management.azure.com/" {
		t.Fatalf("Azure token = %d %q, want the honey token for the resource", w.Code, w.Body)
	}
	if w := do(t, m, "GET", "/metadata/instance?api-version=2021-02-01", hdr); w.Code != 200 || !strings.Contains(w.Body.String(), m.Honey().AzureSubscription) {
		t.Errorf("Azure instance = %d %q", w.Code, w.Body)
	}
	for _, h := range m.Recorder().Hits() {
		if h.Service != ServiceAzure {
			t.Errorf("hit %+v has service %q, want %s", h, h.Service, ServiceAzure)
		}
	}
}
