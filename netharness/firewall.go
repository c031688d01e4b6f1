package netharness

import (
	"fmt"
	"net/netip"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/coreos/go-iptables/iptables"
)

// rule is one iptables rule in the filter table.
type rule struct {
	chain string
	spec  []string
}

func (r rule) String() string { return r.chain + " " + strings.Join(r.spec, " ") }

// forwardRules stop every forwarded packet into or out of the bridge.
// DOCKER-USER is the chain Docker evaluates first in FORWARD and never
// rewrites, so the drops sit ahead of Docker's own accept rules. With
// br_netfilter, traffic between two ports of the bridge passes FORWARD too
// (in and out the bridge): the open profile accepts it, so sandboxes on the
// network reach each other (and the neighbour) as on Docker's default
// bridge; every other profile drops it, as enable_icc=false would. Such
// traffic never leaves the bridge.
func forwardRules(bridge, egress string) []rule {
	var rules []rule
	if egress == "" || egress == "open" {
		rules = append(rules, rule{"DOCKER-USER", []string{"-i", bridge, "-o", bridge, "-j", "ACCEPT"}})
	}
	return append(rules,
		rule{"DOCKER-USER", []string{"-i", bridge, "-j", "DROP"}},
		rule{"DOCKER-USER", []string{"-o", bridge, "-j", "DROP"}})
}

// inputRules let packets from the bridge reach only the harness addresses
// the egress profile grants; everything else the host listens on stays out
// of the sandbox's reach. Open (or empty) grants every harness address (the
// metadata canaries on 169.254.169.254, 169.254.170.2 and 100.100.100.200, the outside addresses with their sinks, second resolver
// and package mirror, and the gateway with the DNS canary); mirror-only
// grants the package mirror and the filtering resolver on the gateway's
// port 53; proxy-only grants that resolver and the egress proxy on the
// gateway's ProxyPort; broker-only that resolver and the tool broker on
// BrokerPort; none grants that resolver alone. Under a profile
// that grants less than everything, TCP and UDP are rejected rather than
// dropped, so the sandbox's own resolver (Docker's 127.0.0.11) fails at once
// instead of timing out and the probes get a clear "refused". Order
// matters: the accepts precede the rejects and the drop.
func inputRules(bridge, gateway, egress string) ([]rule, error) {
	var allowed []netip.Addr
	switch egress {
	case "", "open":
		allowed = append(hostAddrs(), netip.MustParseAddr(gateway))
	case "mirror-only":
		allowed = []netip.Addr{mirrorIP}
	case "broker-only":
		// The tool broker on the gateway; added below with the resolver.
	case "proxy-only":
		// The egress proxy on the gateway (canary.Proxy, which tunnels to the
		// mirror alone under this profile); added below with the resolver.
	case "none":
	default:
		return nil, fmt.Errorf("egress profile %q: the harness has no canary standing for what it allows (it serves none, mirror-only, broker-only, proxy-only and open)", egress)
	}
	var rules []rule
	for _, a := range allowed {
		rules = append(rules, rule{"INPUT", []string{"-i", bridge, "-d", a.String() + "/32", "-j", "ACCEPT"}})
	}
	if egress != "" && egress != "open" {
		// The sandbox's resolver, a filtering one under these profiles (see
		// startCanaries), on its port 53 only.
		for _, proto := range []string{"udp", "tcp"} {
			rules = append(rules, rule{"INPUT", []string{"-i", bridge, "-d", gateway + "/32", "-p", proto, "--dport", "53", "-j", "ACCEPT"}})
		}
		if port := map[string]int{"proxy-only": ProxyPort, "broker-only": BrokerPort}[egress]; port != 0 {
			rules = append(rules, rule{"INPUT", []string{"-i", bridge, "-d", gateway + "/32", "-p", "tcp", "--dport", strconv.Itoa(port), "-j", "ACCEPT"}})
		}
		rules = append(rules,
			rule{"INPUT", []string{"-i", bridge, "-p", "tcp", "-j", "REJECT", "--reject-with", "tcp-reset"}},
			rule{"INPUT", []string{"-i", bridge, "-p", "udp", "-j", "REJECT", "--reject-with", "icmp-port-unreachable"}})
	}
	return append(rules, rule{"INPUT", []string{"-i", bridge, "-j", "DROP"}}), nil
}

// bridgePattern matches the names of harness bridges.
var bridgePattern = regexp.MustCompile(`^scbr-[0-9a-f]{8}$`)

// ruleMentionsBridge matches an iptables -S line naming a harness bridge as
// in- or out-interface.
var ruleMentionsBridge = regexp.MustCompile(`(^| )-[io] scbr-[0-9a-f]{8}( |$)`)

// sweptChains are the chains the harness adds rules to.
var sweptChains = []string{"DOCKER-USER", "INPUT"}

// insertRules inserts rules at the top of their chains, keeping their given
// order, and returns the ones that went in (for undo on failure).
func insertRules(ipt *iptables.IPTables, rules []rule) ([]rule, error) {
	var done []rule
	pos := map[string]int{}
	for _, r := range rules {
		pos[r.chain]++
		if err := ipt.Insert("filter", r.chain, pos[r.chain], r.spec...); err != nil {
			return done, fmt.Errorf("inserting rule %s: %w", r, err)
		}
		done = append(done, r)
	}
	return done, nil
}

// checkForwardOrder fails unless FORWARD jumps to DOCKER-USER before any
// rule that names the bridge; otherwise Docker's accepts would win over the
// drops.
func checkForwardOrder(ipt *iptables.IPTables, bridge string) error {
	lines, err := ipt.List("filter", "FORWARD")
	if err != nil {
		return fmt.Errorf("listing FORWARD: %w", err)
	}
	jump := slices.Index(lines, "-A FORWARD -j DOCKER-USER")
	if jump < 0 {
		return fmt.Errorf("checking FORWARD: no jump to DOCKER-USER, so the drop rules would not apply")
	}
	for i, l := range lines[:jump] {
		if strings.Contains(l+" ", " "+bridge+" ") {
			return fmt.Errorf("checking FORWARD: rule %d %q names %s ahead of the DOCKER-USER jump", i, l, bridge)
		}
	}
	return nil
}

// harnessRules lists the rules in the swept chains naming a harness bridge
// (any bridge when bridge is empty), as deletable specs.
func harnessRules(ipt *iptables.IPTables, bridge string) ([]rule, error) {
	return harnessRulesIn(ipt, sweptChains, bridge)
}

// harnessRulesIn is harnessRules over the given chains (the IPv6 fence's
// are sweptChains6).
func harnessRulesIn(ipt *iptables.IPTables, chains []string, bridge string) ([]rule, error) {
	var out []rule
	for _, chain := range chains {
		lines, err := ipt.List("filter", chain)
		if err != nil {
			return nil, fmt.Errorf("listing %s: %w", chain, err)
		}
		for _, l := range lines {
			if !ruleMentionsBridge.MatchString(l) || (bridge != "" && !strings.Contains(l+" ", " "+bridge+" ")) {
				continue
			}
			f := strings.Fields(l)
			if len(f) < 3 || f[0] != "-A" || f[1] != chain {
				continue
			}
			out = append(out, rule{chain: chain, spec: f[2:]})
		}
	}
	return out, nil
}

func deleteRule(ipt *iptables.IPTables, r rule) error {
	if err := ipt.DeleteIfExists("filter", r.chain, r.spec...); err != nil {
		return fmt.Errorf("deleting rule %s: %w", r, err)
	}
	return nil
}
