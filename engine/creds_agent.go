package engine

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/sandcheck/sandcheck/canary"
	"github.com/sandcheck/sandcheck/evidence"
	"github.com/sandcheck/sandcheck/probes"
)

// The SSH-agent canary: a unix socket in the run folder that speaks enough
// of the SSH agent protocol (draft-miller-ssh-agent) for a client to list
// keys, and records every request. A target mounts its folder and names the
// socket in SSH_AUTH_SOCK, the way a developer's forwarded agent reaches a
// container; a probe that talks to it proves the box could use the agent.
const (
	// AgentDir is the folder holding the socket, in the run folder.
	AgentDir = "agent"
	// AgentSocket is the socket's file name.
	AgentSocket = "agent.sock"
	// ServiceSSHAgent names the agent canary's hits.
	ServiceSSHAgent = "ssh-agent"
	// AgentExtension is the extension name under which a probe sends
	// "<probe ID> <token>", so its contact can be joined to it.
	AgentExtension = "sandcheck@sandcheck.dev"
)

// Bounds of the agent canary.
const (
	agentMaxMsg      = 4096
	agentMaxMsgs     = 16
	agentConnTimeout = 5 * time.Second
	agentMaxConns    = 16
	agentMaxHits     = 1000
)

// SSH agent message numbers used here.
const (
	agentFailure           = 5
	agentSuccess           = 6
	agentRequestIdentities = 11
	agentIdentitiesAnswer  = 12
	agentExtension         = 27
)

type agentCanary struct {
	ln    net.Listener
	rec   *canary.Recorder
	slots chan struct{}
	wg    sync.WaitGroup
}

// serveAgent listens on <runDir>/agent/agent.sock until close.
func serveAgent(runDir string, onHit func(canary.Hit)) (*agentCanary, error) {
	dir := filepath.Join(runDir, AgentDir)
	if err := os.Mkdir(dir, 0o700); err != nil {
		return nil, fmt.Errorf("creating agent folder: %w", err)
	}
	ln, err := net.Listen("unix", filepath.Join(dir, AgentSocket))
	if err != nil {
		return nil, fmt.Errorf("listening on the agent socket: %w", err)
	}
	a := &agentCanary{ln: ln, rec: canary.NewRecorder(agentMaxHits, onHit), slots: make(chan struct{}, agentMaxConns)}
	a.wg.Add(1)
	go a.accept()
	return a, nil
}

func (a *agentCanary) accept() {
	defer a.wg.Done()
	for {
		c, err := a.ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			time.Sleep(10 * time.Millisecond)
			continue
		}
		select {
		case a.slots <- struct{}{}:
		default:
			c.Close() // too many at once: a flood gets nothing
			continue
		}
		a.wg.Add(1)
		go func() {
			defer a.wg.Done()
			defer func() { <-a.slots }()
			a.serve(c)
		}()
	}
}

// serve answers one connection: at most agentMaxMsgs messages of at most
// agentMaxMsg bytes within agentConnTimeout. Everything read is hostile.
func (a *agentCanary) serve(c net.Conn) {
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(agentConnTimeout))
	for i := 0; i < agentMaxMsgs; i++ {
		var n uint32
		if binary.Read(c, binary.BigEndian, &n) != nil || n == 0 || n > agentMaxMsg {
			return
		}
		msg := make([]byte, n)
		if _, err := io.ReadFull(c, msg); err != nil {
			return
		}
		h := canary.Hit{Time: time.Now().UTC(), Service: ServiceSSHAgent, Remote: "unix:" + AgentSocket, Transport: "unix"}
		reply := []byte{agentFailure}
		switch msg[0] {
		case agentRequestIdentities:
			h.Method = "request-identities"
			reply = []byte{agentIdentitiesAnswer, 0, 0, 0, 0} // no keys
		case agentExtension:
			name, rest, ok := sshString(msg[1:])
			h.Method = "extension " + clipText(name, 64)
			if ok && name == AgentExtension {
				if payload, _, ok := sshString(rest); ok {
					probe, token, _ := strings.Cut(payload, " ")
					h.Probe, h.Token = clipText(probe, 64), clipText(token, 64)
				}
				reply = []byte{agentSuccess}
			}
		default:
			h.Method = fmt.Sprintf("message %d", msg[0])
		}
		a.rec.Record(h)
		out := binary.BigEndian.AppendUint32(nil, uint32(len(reply)))
		if _, err := c.Write(append(out, reply...)); err != nil {
			return
		}
	}
}

// sshString reads one SSH "string" (uint32 length, bytes) off b.
func sshString(b []byte) (string, []byte, bool) {
	if len(b) < 4 {
		return "", nil, false
	}
	n := binary.BigEndian.Uint32(b)
	if uint64(n) > uint64(len(b)-4) {
		return "", nil, false
	}
	return string(b[4 : 4+n]), b[4+n:], true
}

func clipText(s string, n int) string {
	s = strings.ToValidUTF8(s, "?")
	if len(s) > n {
		s = s[:n]
	}
	return s
}

// close stops the listener and waits for the connections being served.
func (a *agentCanary) close() {
	if a == nil {
		return
	}
	a.ln.Close()
	a.wg.Wait()
}

// evidence joins the agent hits carrying the probe's token.
func (a *agentCanary) evidence(spec probes.Spec, token string) evidence.Item {
	var seen []string
	for _, h := range a.rec.ByToken(token) {
		if h.Probe == spec.ID {
			seen = append(seen, h.Method)
		}
	}
	if len(seen) == 0 {
		return evidence.Item{Source: evidence.SourceCanary, Kind: "agent-socket",
			Summary: "nothing with the probe's token reached the harness's SSH-agent socket"}
	}
	return evidence.Item{Source: evidence.SourceCanary, Kind: "agent-hit", Indicates: probes.Escaped,
		Summary: fmt.Sprintf("the probe's request reached the SSH-agent socket the harness serves in the run folder: %s", truncate(strings.Join(seen, ", "), 200)),
		Data:    map[string]string{"token": token}}
}
