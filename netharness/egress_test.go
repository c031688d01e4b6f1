package netharness

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"slices"
	"testing"
	"time"

	"github.com/miekg/dns"
	"golang.org/x/sys/unix"

	"github.com/sandcheck/sandcheck/canary"
)

// TestMirrorOnlyNetwork builds a mirror-only harness network and checks
// what it enforces: INPUT accepts the package mirror and the gateway's :53
// and rejects the rest, and the resolver on the gateway's :53 answers the
// mirror's name and refuses an exfiltration name, while the canary on the
// alternate port still answers it. The queries go from the host to the
// gateway, a harness address.
func TestMirrorOnlyNetwork(t *testing.T) {
	docker := needHost(t)
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	n, err := Create(ctx, Options{RunID: "test-" + randomHex(t), Docker: docker, Egress: "mirror-only",
		Logger: slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelDebug}))})
	if err != nil {
		t.Fatalf("creating harness network: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		if err := n.Close(ctx); err != nil {
			t.Errorf("closing harness network: %v", err)
		}
	})
	if n.Egress() != "mirror-only" || n.Role(n.MirrorAddr()) != RolePackageMirror || !slices.Contains(n.Owned(), mirrorIP) {
		t.Errorf("egress %q, mirror role %q, owned %v", n.Egress(), n.Role(n.MirrorAddr()), n.Owned())
	}
	want, _ := inputRules(n.Bridge(), n.Gateway().String(), "mirror-only")
	got, err := harnessRules(n.ipt, n.Bridge())
	if err != nil {
		t.Fatal(err)
	}
	var in []string
	for _, r := range got {
		if r.chain == "INPUT" {
			in = append(in, r.String())
		}
	}
	if len(in) != len(want) {
		t.Errorf("INPUT rules naming the bridge: %q, want the %d of inputRules(mirror-only)", in, len(want))
	}

	// The resolver is asked as a sandbox asks it, from a namespace on the
	// bridge: the host's own port-53 traffic may be redirected by the
	// machine's nat table (a local DNS proxy, on some machines), never the
	// sandboxes'. The alternate port is asked from the host, which the
	// mirror-only fence lets through and a sandbox's would not.
	ns, err := AttachTo(n, "egress-test")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := ns.Close(); err != nil {
			t.Errorf("closing the test's namespace: %v", err)
		}
	})
	exchange := func(fromBox bool, server, name string) *dns.Msg {
		t.Helper()
		m := new(dns.Msg)
		m.SetQuestion(dns.Fqdn(name), dns.TypeA)
		var r *dns.Msg
		ask := func() (err error) {
			r, _, err = (&dns.Client{Timeout: 3 * time.Second}).Exchange(m, server)
			return err
		}
		if fromBox {
			err = onLockedThread(func(int) error {
				if err := unix.Setns(int(ns.File().Fd()), unix.CLONE_NEWNET); err != nil {
					return fmt.Errorf("entering the test's namespace: %w", err)
				}
				return ask()
			})
		} else {
			err = ask()
		}
		if err != nil {
			t.Fatalf("asking %s for %s: %v", server, name, err)
		}
		return r
	}
	resolver := net.JoinHostPort(n.DNS(), "53")
	if r := exchange(true, resolver, "mirror."+n.DNSZone()); len(r.Answer) != 1 || r.Answer[0].(*dns.A).A.String() != mirrorIP.String() {
		t.Errorf("the resolver answered the mirror's name with %v, want %s", r.Answer, mirrorIP)
	}
	exfil := "tok1.egress.dns-exfil.x." + n.DNSZone()
	if r := exchange(true, resolver, exfil); r.Rcode != dns.RcodeRefused {
		t.Errorf("the resolver answered an exfiltration name with %s, want REFUSED", dns.RcodeToString[r.Rcode])
	}
	if r := exchange(false, n.DNSAltAddr(), exfil); r.Rcode != dns.RcodeSuccess {
		t.Errorf("the canary on the alternate port answered %s, want NOERROR", dns.RcodeToString[r.Rcode])
	}
	var services []string
	for _, h := range n.Recorder().ByToken("tok1") {
		services = append(services, h.Service)
	}
	if !slices.Equal(services, []string{canary.ServiceDNSFilter, canary.ServiceDNS}) {
		t.Errorf("hits with the token came from %v, want the filter then the canary", services)
	}
}
