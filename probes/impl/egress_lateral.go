package impl

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"

	"github.com/sandcheck/sandcheck/probes"
)

// gatewayServicePorts are the host-service ports egress.gateway-services
// tries on the bridge gateway: the Docker engine API and the kubelet
// (netharness.GatewayServicePorts, where the harness listens).
var gatewayServicePorts = []int{2375, 10250}

// neighbourPorts are the ports egress.neighbour tries on the neighbouring
// sandbox: an application port and an exec daemon's control port
// (netharness.NeighbourPorts).
var neighbourPorts = []int{8080, 2375}

func init() {
	register(map[string]Func{
		"egress.gateway-services": gatewayServices,
		"egress.neighbour":        neighbourSandbox,
	})
}

// gatewayServices connects to host-service ports on the bridge gateway, the
// host's own side of the sandbox's network, and sends its token. An
// established connection is the escape: the host's services are in reach.
func gatewayServices(ctx context.Context, p probes.Params) probes.Result {
	e := ev{}
	if p.GatewayAddr == "" {
		return noAddress("gateway address", e)
	}
	return helloPorts(ctx, p, e, p.GatewayAddr, gatewayServicePorts, "egress.gateway-services", "the host's gateway address")
}

// neighbourSandbox connects to a neighbouring sandbox's listener and
// control ports on the same network and sends its token. An established
// connection is the escape: tenants can reach each other.
func neighbourSandbox(ctx context.Context, p probes.Params) probes.Result {
	e := ev{}
	if p.NeighbourAddr == "" {
		return noAddress("neighbour address", e)
	}
	return helloPorts(ctx, p, e, p.NeighbourAddr, neighbourPorts, "egress.neighbour", "the neighbouring sandbox")
}

// helloPorts connects to addr on each port at once, sends the probe's hello
// and reads the listener's reply; any established connection is an escape.
func helloPorts(ctx context.Context, p probes.Params, e ev, addr string, ports []int, probe, what string) probes.Result {
	e.set("addr", addr)
	line := hello(p, probe)
	res := make([]tcpAttempt, len(ports))
	var wg sync.WaitGroup
	for i, port := range ports {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, a, err := tcpHello(ctx, net.JoinHostPort(addr, strconv.Itoa(port)), line)
			res[i] = tcpAttempt{port: port, connected: c, acked: a, err: err}
		}()
	}
	wg.Wait()
	var open, acked, closed []string
	for _, r := range res {
		ps := strconv.Itoa(r.port)
		switch {
		case r.connected:
			open = append(open, ps)
			if r.acked {
				acked = append(acked, ps)
			}
		default:
			closed = append(closed, ps)
			if _, ok := e["first_err"]; !ok {
				e.setErr("first_", r.err)
			}
		}
	}
	e.setList("open", open)
	e.setList("acked", acked)
	e.setList("closed", closed)
	if len(open) > 0 {
		return escaped(fmt.Sprintf("TCP connections to %s were established on port(s) %s", what, strings.Join(open, ", ")), e)
	}
	return blocked(fmt.Sprintf("no TCP connection to %s could be made on any port", what), e)
}
