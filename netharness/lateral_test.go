package netharness

import (
	"bufio"
	"io"
	"net"
	"net/netip"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/vishvananda/netlink"

	"github.com/sandcheck/sandcheck/canary"
)

// TestForwardRulesByProfile: the open profile lets sandboxes on the bridge
// reach each other (bridge to bridge accepted ahead of the drops); every
// other profile drops all forwarding on the bridge, that included.
func TestForwardRulesByProfile(t *testing.T) {
	accept := "DOCKER-USER -i scbr-00000000 -o scbr-00000000 -j ACCEPT"
	drops := []string{"DOCKER-USER -i scbr-00000000 -j DROP", "DOCKER-USER -o scbr-00000000 -j DROP"}
	for egress, want := range map[string][]string{
		"":            append([]string{accept}, drops...),
		"open":        append([]string{accept}, drops...),
		"mirror-only": drops,
		"none":        drops,
	} {
		var got []string
		for _, r := range forwardRules("scbr-00000000", egress) {
			got = append(got, r.String())
		}
		if !slices.Equal(got, want) {
			t.Errorf("egress %q: forward rules %q, want %q", egress, got, want)
		}
	}
}

// TestNeighbourAndGatewayListeners builds an open harness network and, from
// the host (whose traffic to the bridge's subnet is its own, not
// forwarded), says hello to the neighbour's and the gateway's listeners: each
// hit carries the token and is named for its role. The neighbour's address is
// outside the containers' range, its link is on the bridge, and Close takes
// link and namespace away.
func TestNeighbourAndGatewayListeners(t *testing.T) {
	docker := needHost(t)
	n := createForTest(t, docker, nil)
	nb := n.NeighbourAddr()
	if !n.Subnet().Contains(nb) || n.plan.IPRange.Contains(nb) || !slices.Contains(n.Owned(), nb) {
		t.Errorf("neighbour %s: want it in %s, outside %s, and owned", nb, n.Subnet(), n.plan.IPRange)
	}
	l, err := netlink.LinkByName(n.neighbourLink)
	if err != nil {
		t.Fatalf("neighbour link %q: %v", n.neighbourLink, err)
	}
	if br, err := netlink.LinkByName(n.Bridge()); err != nil || l.Attrs().MasterIndex != br.Attrs().Index {
		t.Errorf("neighbour link %s is not a port of %s (err %v)", n.neighbourLink, n.Bridge(), err)
	}
	say := func(addr netip.Addr, port int, token string) string {
		t.Helper()
		c, err := net.DialTimeout("tcp4", net.JoinHostPort(addr.String(), strconv.Itoa(port)), 3*time.Second)
		if err != nil {
			t.Fatalf("connecting to %s:%d: %v", addr, port, err)
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(3 * time.Second))
		io.WriteString(c, canary.SinkHello+token+"/egress.test\n")
		line, _ := bufio.NewReader(c).ReadString('\n')
		return line
	}
	for _, tc := range []struct {
		addr  netip.Addr
		ports []int
		role  string
	}{{nb, NeighbourPorts, RoleNeighbour}, {n.GatewayAddr(), GatewayServicePorts, RoleHostService}} {
		for _, port := range tc.ports {
			token := "tok" + randomHex(t)
			if got := say(tc.addr, port, token); got != canary.SinkReply+tc.role+"\n" {
				t.Errorf("%s:%d answered %q, want the %s sink", tc.addr, port, got, tc.role)
			}
			hits := n.Recorder().ByToken(token)
			if len(hits) != 1 || hits[0].Probe != "egress.test" || n.Role(hits[0].Local) != tc.role {
				t.Errorf("%s:%d: hits %+v, want one with role %s", tc.addr, port, hits, tc.role)
			}
		}
	}
	if n.Role(net.JoinHostPort(n.GatewayAddr().String(), "53")) != RoleResolver {
		t.Errorf("the gateway's :53 is not the resolver")
	}
	if n.Role(n.OutsideAddr().String()) != RoleOutside {
		t.Errorf("a bare outside address (an ICMP hit's) has no role")
	}
	if err := n.Close(t.Context()); err != nil {
		t.Fatal(err)
	}
	if ok, _ := linkExists(n.neighbourLink); ok {
		t.Errorf("neighbour link %s survived Close", n.neighbourLink)
	}
	if left, err := n.Leftovers(t.Context()); err != nil || len(left) > 0 {
		t.Errorf("leftovers %q (err %v)", left, err)
	}
}
