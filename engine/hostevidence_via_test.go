package engine

import (
	"slices"
	"testing"
)

func TestReachedVias(t *testing.T) {
	paths := "direct: blocked; via-get 127.0.0.1:3128 (HTTP_PROXY): refused; via-connect 127.0.0.1:3128 (HTTP_PROXY,ALL_PROXY): reached; " +
		"via-socks5 127.0.0.1:3128 (ALL_PROXY): reached; via-socks5 127.0.0.1:1080 (FTP_PROXY): reached; bogus: reached; via-" + string(make([]byte, 40)) + ": reached"
	if got := reachedVias(paths); !slices.Equal(got, []string{"via-connect", "via-socks5"}) {
		t.Errorf("reachedVias = %q, want via-connect and via-socks5", got)
	}
	if got := reachedVias("direct: blocked; no proxy path: a UDP probe"); got != nil {
		t.Errorf("no proxy path: %q", got)
	}
}
