package canary

import (
	"net/http"
	"strings"
)

// gcp answers the GCE metadata server API. Like the real server it insists
// on Metadata-Flavor: Google and echoes it, which is how client libraries
// detect GCE.
func (m *Metadata) gcp(r *http.Request) reply {
	rep := m.gcpAnswer(r)
	rep.header = map[string]string{"Metadata-Flavor": "Google", "Server": "Metadata Server for VM"}
	return rep
}

func (m *Metadata) gcpAnswer(r *http.Request) reply {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		return text(http.StatusMethodNotAllowed, "method not allowed\n")
	}
	if r.Header.Get("Metadata-Flavor") != "Google" || forwarded(r) {
		return text(http.StatusForbidden, "Missing required header: Metadata-Flavor\n")
	}
	h := m.honey
	account := "sandcheck-honey@" + h.GCPProject + ".iam.gserviceaccount.com"
	p, ok := strings.CutPrefix(r.URL.Path, "/computeMetadata/v1/")
	if !ok {
		if r.URL.Path == "/" || r.URL.Path == "/computeMetadata/" {
			return text(http.StatusOK, "computeMetadata/\n")
		}
		return text(http.StatusNotFound, "not found\n")
	}
	if rest, ok := strings.CutPrefix(p, "instance/service-accounts/"); ok {
		name, leaf, _ := strings.Cut(rest, "/")
		switch {
		case name == "":
			return text(http.StatusOK, "default/\n"+account+"/\n")
		case name != "default" && name != account:
			return text(http.StatusNotFound, "not found\n")
		}
		switch leaf {
		case "":
			return text(http.StatusOK, "aliases\nemail\nidentity\nscopes\ntoken\n")
		case "email":
			return text(http.StatusOK, account)
		case "aliases":
			return text(http.StatusOK, "default\n")
		case "scopes":
			return text(http.StatusOK, "https://www.googleapis.com/auth/cloud-platform\n")
		case "token":
			return reply{status: http.StatusOK, ctype: "application/json", body: mustJSON(map[string]any{
				"access_token": h.GCPAccessToken,
				"expires_in":   3599,
				"token_type":   "Bearer",
			})}
		case "identity":
			if r.URL.Query().Get("audience") == "" {
				return text(http.StatusBadRequest, "non-empty audience parameter required\n")
			}
			return text(http.StatusOK, h.GCPIdentityToken)
		}
		return text(http.StatusNotFound, "not found\n")
	}
	switch strings.TrimSuffix(p, "/") {
	case "":
		return text(http.StatusOK, "instance/\nproject/\n")
	case "project":
		return text(http.StatusOK, "numeric-project-id\nproject-id\n")
	case "project/project-id":
		return text(http.StatusOK, h.GCPProject)
	case "project/numeric-project-id":
		return text(http.StatusOK, h.AWS.AccountID)
	case "instance":
		return text(http.StatusOK, "id\nservice-accounts/\nzone\n")
	case "instance/id":
		return text(http.StatusOK, h.AWS.AccountID+"0000000")
	case "instance/zone":
		return text(http.StatusOK, "projects/"+h.AWS.AccountID+"/zones/us-central1-a")
	}
	return text(http.StatusNotFound, "not found\n")
}
