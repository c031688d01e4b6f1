package opensandbox

import "testing"

// Endpoints in every form upstream gives: bare (host network mode, server
// networking.py 218), behind execd's proxy (bridge mode, networking.py
// 269), a full https URL (a TLS ingress); a scheme-less one takes the
// lifecycle URL's scheme, as the SDK takes its protocol (sdks/sandbox/go
// sandbox.go 418-421).
func TestParseEndpoint(t *testing.T) {
	for _, c := range []struct {
		ep, scheme, base string
		direct, ip       bool
	}{
		{"172.18.0.2:44772", "http", "http://172.18.0.2:44772", true, true},
		{"10.0.0.5:41234/proxy/44772", "http", "http://10.0.0.5:41234/proxy/44772", true, true},
		{"10.0.0.5:41234/proxy/8000", "http", "http://10.0.0.5:41234/proxy/8000", false, true},
		{"sandbox-1.example.com/execd", "https", "https://sandbox-1.example.com/execd", false, false},
		{"https://sb.example.com:8443/proxy/44772/", "http", "https://sb.example.com:8443/proxy/44772", true, false},
		{"http://172.18.0.2:44772", "https", "http://172.18.0.2:44772", true, true},
	} {
		e, err := parseEndpoint(c.ep, c.scheme)
		if err != nil || e.base != c.base || e.direct != c.direct || e.addr.IsValid() != c.ip {
			t.Errorf("parseEndpoint(%q, %s) = %+v, %v; want base %s direct %v ip %v", c.ep, c.scheme, e, err, c.base, c.direct, c.ip)
		}
	}
	for _, bad := range []string{"ftp://h/x", "http://user:pw@h:1", "h:1/?q=1", ""} {
		if e, err := parseEndpoint(bad, "http"); err == nil {
			t.Errorf("parseEndpoint(%q) = %+v, want an error", bad, e)
		}
	}
	if schemeOf("https://gw.example.com/v1") != "https" || schemeOf("http://127.0.0.1:8080/v1") != "http" {
		t.Error("schemeOf does not read the lifecycle URL's scheme")
	}
}
