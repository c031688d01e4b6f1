package impl

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/sandcheck/sandcheck/probes"
)

func init() {
	register(map[string]Func{
		"egress.opensandbox-ip-literal": osbIPLiteral,
	})
}

// osbCanaryGreeting starts the harness IP canary's answer; the probe's token
// follows (runners/opensandbox, CanaryGreeting).
const osbCanaryGreeting = "sandcheck-ip-canary "

// osbIPLiteral connects to the harness's canary by IP literal (no name
// leads to it, so no DNS answer can have opened the way) and sends the
// probe's token. OpenSandbox's egress sidecar in its default dns mode
// filters names only: an allowed-by-name policy then lets an IP literal
// through; dns+nft drops what no allowed answer opened.
func osbIPLiteral(ctx context.Context, p probes.Params) probes.Result {
	e := ev{}
	if p.IPCanaryAddr == "" {
		e.set("sent", "false")
		return inconclusive("the harness named no IP canary; nothing was sent", e)
	}
	e.set("canary", p.IPCanaryAddr)
	if status, _, refused, err := osbDo(ctx, http.MethodGet, "http://"+osbEgressAddr+"/policy", ""); refused {
		e.set("egress_sidecar", "absent")
	} else if err == nil {
		e.set("egress_sidecar", "present")
		e.setInt("egress_policy_status", status)
	}
	ctx, cancel := context.WithTimeout(ctx, osbTimeout)
	defer cancel()
	conn, err := (&net.Dialer{}).DialContext(ctx, "tcp4", p.IPCanaryAddr)
	if err != nil {
		e.setErr("", err)
		if osbUnreachable(err) {
			return blocked("no connection to the harness canary by IP literal "+p.IPCanaryAddr+": egress holds IP destinations", e)
		}
		return inconclusive("connecting to the harness canary failed", e)
	}
	defer conn.Close()
	e.set("connected", "true")
	if dl, ok := ctx.Deadline(); ok {
		_ = conn.SetDeadline(dl)
	} else {
		_ = conn.SetDeadline(time.Now().Add(osbTimeout))
	}
	if _, err := io.WriteString(conn, headerSafe(p.Token)+"/egress.opensandbox-ip-literal\n"); err != nil {
		e.setErr("write_", err)
		return inconclusive("connected to the canary's address, but the hello could not be sent", e)
	}
	line, err := bufio.NewReader(io.LimitReader(conn, 512)).ReadString('\n')
	if err != nil {
		e.setErr("read_", err)
		return inconclusive("connected to the canary's address, but no greeting came back", e)
	}
	if strings.TrimSpace(line) != osbCanaryGreeting+headerSafe(p.Token) {
		e.set("answer", osbLine(line))
		return inconclusive("something answered on the canary's address, not the harness canary", e)
	}
	e.set("canary_greeted", "true")
	return escaped("reached the harness canary by IP literal "+p.IPCanaryAddr+" and it recorded the token: the egress policy does not hold destinations named by address", e)
}
