package probes

import "testing"

func TestWrapperProxyEndpoint(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"http://localhost:3128", "http://127.0.0.1:3128"},
		{"http://srt.abc%3D:tok@localhost:3128/", "http://127.0.0.1:3128"},
		{"socks5h://u:p@localhost:1080", "socks5://127.0.0.1:1080"},
		{"socks5://[::1]:1080", "socks5://[::1]:1080"},
		{"socks5://127.0.0.2:1080", "socks5://127.0.0.2:1080"},
		{"https://localhost:3128", ""},
		{"socks4://localhost:1080", ""},
		{"http://localhost", ""},
		{"http://localhost:0", ""},
		{"http://10.0.0.1:3128", ""},
		{"http://0.0.0.0:3128", ""},
		{"http://proxy.example:3128", ""},
		{"localhost:1080", ""},
	} {
		got, err := WrapperProxyEndpoint(tc.in)
		if got != tc.want || (err == nil) != (tc.want != "") {
			t.Errorf("WrapperProxyEndpoint(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
		}
	}
}
