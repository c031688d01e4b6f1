package canary

import (
	"net/http"
	"strconv"
)

// azure answers the Azure IMDS API: it demands the Metadata: true header and
// an api-version query, as the real service does, and hands out a
// managed-identity token at /metadata/identity/oauth2/token.
func (m *Metadata) azure(r *http.Request) reply {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		return azureError(http.StatusMethodNotAllowed, "Method not allowed")
	}
	if r.Header.Get("Metadata") != "true" || forwarded(r) {
		return azureError(http.StatusBadRequest, "Required metadata header not specified")
	}
	q := r.URL.Query()
	if q.Get("api-version") == "" {
		return azureError(http.StatusBadRequest, "Required query variable 'api-version' is missing")
	}
	h := m.honey
	switch r.URL.Path {
	case "/metadata/identity/oauth2/token":
		resource := q.Get("resource")
		if resource == "" {
			return azureError(http.StatusBadRequest, "Required query variable 'resource' is missing")
		}
		now := m.now().Unix()
		return jsonReply(map[string]string{
			"access_token":   h.AzureAccessToken,
			"client_id":      h.AzureClientID,
			"expires_in":     "86399",
			"expires_on":     strconv.FormatInt(now+86399, 10),
			"ext_expires_in": "86399",
			"not_before":     strconv.FormatInt(now, 10),
			"resource":       clip(resource),
			"token_type":     "Bearer",
		})
	case "/metadata/instance", "/metadata/instance/compute":
		compute := map[string]string{
			"location":          "eastus",
			"name":              "sandcheck-honey-vm",
			"resourceGroupName": "sandcheck-honey",
			"subscriptionId":    h.AzureSubscription,
			"vmId":              h.InstanceID[2:],
		}
		if r.URL.Path == "/metadata/instance" {
			return jsonReply(map[string]any{"compute": compute})
		}
		return jsonReply(compute)
	}
	return azureError(http.StatusNotFound, "Resource not found")
}

func jsonReply(v any) reply {
	return reply{status: http.StatusOK, ctype: "application/json; charset=utf-8", body: mustJSON(v)}
}

func azureError(status int, msg string) reply {
	rep := jsonReply(map[string]string{"error": "invalid_request", "error_description": msg})
	rep.status = status
	return rep
}
