package opensandbox

import (
	"bufio"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"strings"
	"testing"
)

// The canary greets a hello line with its token, and ignores a line that
// names no token.
func TestCanaryAnswer(t *testing.T) {
	c := &ipCanary{log: slog.New(slog.DiscardHandler)}
	for _, tc := range []struct{ hello, want string }{
		{"tok-123/egress.opensandbox-ip-literal\n", CanaryGreeting + "tok-123\n"},
		{"/egress.opensandbox-ip-literal\n", ""},
		{"two words/x\n", ""},
	} {
		a, b := net.Pipe()
		go c.answer(b)
		go func() { _, _ = io.WriteString(a, tc.hello) }()
		got, _ := bufio.NewReader(a).ReadString('\n')
		a.Close()
		if got != tc.want {
			t.Errorf("hello %q: answer %q, want %q", tc.hello, got, tc.want)
		}
	}
}

// A platform reached over loopback gives no address a sandbox could dial:
// the canary refuses to start there rather than listen where no sandbox
// reaches it.
func TestCanaryRefusesLoopback(t *testing.T) {
	_, err := startCanary(netip.MustParseAddrPort("127.0.0.1:44772"), slog.New(slog.DiscardHandler))
	if err == nil || !strings.Contains(err.Error(), "no sandbox can dial") {
		t.Fatalf("canary facing loopback: %v", err)
	}
}
