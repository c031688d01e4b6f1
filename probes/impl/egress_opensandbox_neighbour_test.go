package impl

import "testing"

// The neighbour's execd is named bare (upstream's host network mode) or
// behind execd's own proxy (its bridge mode, server networking.py 269);
// anything else, a host name above all, is not sent to.
func TestOsbExecdBase(t *testing.T) {
	for addr, want := range map[string]string{
		"172.18.0.2:44772":              "http://172.18.0.2:44772",
		"172.18.0.2:41234/proxy/44772":  "http://172.18.0.2:41234/proxy/44772",
		"example.com:44772":             "",
		"172.18.0.2":                    "",
		"[::1]:44772":                   "",
		"172.18.0.2:44772/other/44772":  "",
		"172.18.0.2:44772/proxy/x":      "",
		"172.18.0.2:44772/proxy/070":    "",
		"172.18.0.2:44772/proxy/44772/": "",
	} {
		got, err := osbExecdBase(addr)
		if got != want || (want == "") != (err != nil) {
			t.Errorf("osbExecdBase(%q) = %q, %v; want %q", addr, got, err, want)
		}
	}
}
