package opensandbox

import (
	"bufio"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"strings"
	"sync"
	"time"
)

// CanaryGreeting starts the canary's answer to a probe's hello line; the
// probe's token follows, so the probe knows it reached the harness's canary
// and not some other listener.
const CanaryGreeting = "sandcheck-ip-canary "

// canaryConns bounds the connections the canary serves in a run, and
// canaryLine one hello line.
const (
	canaryConns = 256
	canaryLine  = 512
)

// ipCanary is a token-recording TCP listener on the host's own address
// facing the sandboxes' network: no name leads to it, so a sandbox reaches
// it only by IP literal. It only answers; it never connects anywhere.
type ipCanary struct {
	ln   net.Listener
	addr string
	log  *slog.Logger
	wg   sync.WaitGroup
}

// startCanary listens on the host's address facing sandboxAddr, on a port
// the kernel picks. A sandbox reached over loopback (a platform proxy on
// the host) gives no address a sandbox could dial: that is an error.
func startCanary(sandboxAddr netip.AddrPort, log *slog.Logger) (*ipCanary, error) {
	host, err := hostAddrFacing(sandboxAddr)
	if err != nil {
		return nil, err
	}
	if host.IsLoopback() || host.IsUnspecified() {
		return nil, fmt.Errorf("the host reaches the sandboxes at %s from %s, an address no sandbox can dial", sandboxAddr, host)
	}
	ln, err := net.Listen("tcp4", netip.AddrPortFrom(host, 0).String())
	if err != nil {
		return nil, fmt.Errorf("starting the IP canary on %s: %w", host, err)
	}
	c := &ipCanary{ln: ln, addr: ln.Addr().String(), log: log}
	c.wg.Add(1)
	go c.serve()
	return c, nil
}

func (c *ipCanary) serve() {
	defer c.wg.Done()
	for i := 0; i < canaryConns; i++ {
		conn, err := c.ln.Accept()
		if err != nil {
			return
		}
		c.wg.Add(1)
		go func() {
			defer c.wg.Done()
			c.answer(conn)
		}()
	}
}

// answer reads one bounded hello line ("<token>/<probe>"), logs it and
// greets back with the same token.
func (c *ipCanary) answer(conn net.Conn) {
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
	line, err := bufio.NewReader(io.LimitReader(conn, canaryLine)).ReadString('\n')
	if err != nil {
		return
	}
	line = strings.TrimSpace(line)
	token, _, _ := strings.Cut(line, "/")
	if token == "" || strings.ContainsAny(token, " \t") {
		return
	}
	c.log.Info("IP canary hit", "from", conn.RemoteAddr().String(), "hello", line)
	_, _ = io.WriteString(conn, CanaryGreeting+token+"\n")
}

func (c *ipCanary) close() error {
	err := c.ln.Close()
	c.wg.Wait()
	if err != nil {
		return fmt.Errorf("closing the IP canary: %w", err)
	}
	return nil
}

// randSuffix is a short random hex word for names.
func randSuffix() string {
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
