package impl

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"time"

	"github.com/sandcheck/sandcheck/probes"
)

// agentExtension is the SSH agent extension under which the probe names
// itself to a harness-run agent canary ("<probe ID> <token>"); a real agent
// answers it with a failure.
const agentExtension = "sandcheck@sandcheck.dev"

// Bounds of the agent probe.
const (
	agentDialTimeout = 2 * time.Second
	agentIOTimeout   = 3 * time.Second
	agentReplyMax    = 64 << 10
	agentMaxSockets  = 8
)

func init() {
	register(map[string]Func{"secrets.agent-socket": agentSocket})
}

// agentSocket looks for an SSH agent's socket (SSH_AUTH_SOCK, then the
// /tmp/ssh-*/agent.* sockets ssh-agent makes) and asks each one it can
// reach for its identities, the first step of using a forwarded agent to
// sign in as its owner. It then names itself to the agent in an extension
// request, so an agent canary can join the contact to the probe.
func agentSocket(ctx context.Context, p probes.Params) probes.Result {
	var socks []string
	if s := os.Getenv("SSH_AUTH_SOCK"); filepath.IsAbs(s) {
		socks = append(socks, filepath.Clean(s))
	}
	if m, _ := filepath.Glob("/tmp/ssh-*/agent.*"); len(m) > 0 {
		socks = append(socks, m...)
	}
	e := ev{}
	if len(socks) == 0 {
		return blocked("no SSH agent socket: SSH_AUTH_SOCK is unset and /tmp/ssh-*/agent.* is empty", e)
	}
	if len(socks) > agentMaxSockets {
		socks = socks[:agentMaxSockets]
	}
	e.setList("sockets", socks)
	var refused []string
	for _, s := range socks {
		if ctx.Err() != nil {
			break
		}
		keys, err := askAgent(ctx, s, p.Token)
		if err != nil {
			lbl := err.Error()
			if n, ok := errnoOf(err); ok {
				lbl = errnoLabel(n)
			}
			refused = append(refused, s+":"+lbl)
			continue
		}
		e.set("agent", s)
		e.setInt("identities", keys)
		return escaped(fmt.Sprintf("the SSH agent at %s answered a request for its identities (%d listed)", s, keys), e)
	}
	e.setList("refused", refused)
	return blocked("no SSH agent socket could be reached", e)
}

// askAgent sends REQUEST_IDENTITIES and reads the answer; then it sends the
// naming extension and reads that answer too (best effort).
func askAgent(ctx context.Context, path, token string) (int, error) {
	d := net.Dialer{Timeout: agentDialTimeout}
	c, err := d.DialContext(ctx, "unix", path)
	if err != nil {
		return 0, err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(agentIOTimeout))
	if err := agentWrite(c, []byte{11}); err != nil {
		return 0, err
	}
	reply, err := agentRead(c)
	if err != nil {
		return 0, err
	}
	if reply[0] != 12 || len(reply) < 5 {
		return 0, fmt.Errorf("agent answered message %d, not an identities answer", reply[0])
	}
	keys := int(binary.BigEndian.Uint32(reply[1:5]))
	ext := []byte{27}
	ext = appendSSHString(ext, agentExtension)
	ext = appendSSHString(ext, "secrets.agent-socket "+token)
	if agentWrite(c, ext) == nil {
		_, _ = agentRead(c)
	}
	return keys, nil
}

func appendSSHString(b []byte, s string) []byte {
	b = binary.BigEndian.AppendUint32(b, uint32(len(s)))
	return append(b, s...)
}

func agentWrite(w io.Writer, msg []byte) error {
	_, err := w.Write(append(binary.BigEndian.AppendUint32(nil, uint32(len(msg))), msg...))
	return err
}

// agentRead reads one framed message, bounded.
func agentRead(r io.Reader) ([]byte, error) {
	var n uint32
	if err := binary.Read(r, binary.BigEndian, &n); err != nil {
		return nil, fmt.Errorf("reading the agent's answer: %w", err)
	}
	if n == 0 || n > agentReplyMax {
		return nil, fmt.Errorf("agent answer of %d bytes", n)
	}
	b := make([]byte, n)
	if _, err := io.ReadFull(r, b); err != nil {
		return nil, fmt.Errorf("reading the agent's answer: %w", err)
	}
	return b, nil
}
