package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/miekg/dns"
	"github.com/spf13/pflag"

	"github.com/sandcheck/sandcheck/canary"
)

// freePort finds a loopback port free for both TCP and UDP.
func freePort(t *testing.T) string {
	t.Helper()
	return freePorts(t, 1)[0]
}

// freePorts finds n distinct loopback ports, each free for both TCP and
// UDP: every port found is held until all are, so the kernel cannot hand
// the same port out twice.
func freePorts(t *testing.T, n int) []string {
	t.Helper()
	var held []io.Closer
	defer func() {
		for _, c := range held {
			c.Close()
		}
	}()
	var addrs []string
	for range 20 * n {
		if len(addrs) == n {
			break
		}
		l, err := net.Listen("tcp4", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, l)
		addr := l.Addr().String()
		pc, err := net.ListenPacket("udp4", addr)
		if err != nil {
			continue
		}
		held = append(held, pc)
		addrs = append(addrs, addr)
	}
	if len(addrs) < n {
		t.Fatalf("only %d of %d loopback ports free for both TCP and UDP", len(addrs), n)
	}
	return addrs
}

// freePort6 finds a free TCP port on the IPv6 loopback.
func freePort6(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp6", "[::1]:0")
	if err != nil {
		t.Fatalf("the IPv6 loopback: %v", err)
	}
	defer l.Close()
	return l.Addr().String()
}

// syncBuffer is a bytes.Buffer safe to read while the command writes.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestCanaryServeWritesHits starts `canary serve` on loopback ports, sends
// one request with a token to each canary, stops it and finds every hit,
// attributed to the token, in the hits file.
func TestCanaryServeWritesHits(t *testing.T) {
	ports := freePorts(t, 8)
	meta, dnsAddr, sink, udp := ports[0], ports[1], ports[2], ports[3]
	ecs, alibaba, kube, doh := ports[4], ports[5], ports[6], ports[7]
	meta6 := freePort6(t)
	hits := filepath.Join(t.TempDir(), "hits.jsonl")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cmd := canaryCmd()
	out := &syncBuffer{}
	cmd.SetOut(out)
	cmd.SetErr(io.Discard)
	cmd.SetArgs([]string{"serve", "--hits", hits, "--duration", "30s", "--metadata", meta, "--dns", dnsAddr,
		"--sink", sink, "--udp-sink", udp, "--metadata", meta6, "--ecs", ecs, "--alibaba", alibaba,
		"--kube-api", kube, "--kube-token", "planted-sa-token", "--doh", doh})
	done := make(chan error, 1)
	go func() { done <- cmd.ExecuteContext(ctx) }()
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(out.String(), "outside_addr:") {
		if time.Now().After(deadline) {
			t.Fatalf("canary serve did not report its listeners:\n%s", out.String())
		}
		select {
		case err := <-done:
			t.Fatalf("canary serve ended early: %v\n%s", err, out.String())
		case <-time.After(20 * time.Millisecond):
		}
	}
	for _, want := range []string{"metadata_addr: " + meta, "dns_addr: " + dnsAddr, "dns_zone: " + canary.DefaultZone, "sink_tcp: " + sink, "sink_udp: " + udp,
		"metadata_addr: " + meta6, "ecs_addr: " + ecs, "alibaba_addr: " + alibaba, "kube_api_addr: " + kube, "doh_addr: " + doh} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}

	const token = "tok123"
	req, _ := http.NewRequest(http.MethodGet, "http://"+meta+"/latest/meta-data/", nil)
	req.Header.Set(canary.TokenHeader, token+"/metadata.aws-imdsv1")
	resp, err := (&http.Client{Timeout: 5 * time.Second}).Do(req)
	if err != nil {
		t.Fatalf("metadata request: %v", err)
	}
	resp.Body.Close()
	insecure := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	for _, r := range []struct{ url, probe, bearer string }{
		{"http://" + meta6 + "/latest/meta-data/", "metadata.aws-imds-ipv6", ""},
		{"http://" + ecs + "/v2/credentials/x", "metadata.ecs-task-role", ""},
		{"http://" + alibaba + "/latest/meta-data/", "metadata.alibaba", ""},
		{"https://" + kube + "/api", "metadata.k8s-api", "planted-sa-token"},
	} {
		req, _ := http.NewRequest(http.MethodGet, r.url, nil)
		req.Header.Set(canary.TokenHeader, token+"/"+r.probe)
		if r.bearer != "" {
			req.Header.Set("Authorization", "Bearer "+r.bearer)
		}
		resp, err := insecure.Do(req)
		if err != nil {
			t.Fatalf("%s: %v", r.url, err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Errorf("%s answered %s, want 200", r.url, resp.Status)
		}
	}
	m := new(dns.Msg)
	m.SetQuestion(token+".egress.dns-exfil.x."+canary.DefaultZone+".", dns.TypeA)
	if _, _, err := (&dns.Client{Timeout: 5 * time.Second}).Exchange(m, dnsAddr); err != nil {
		t.Fatalf("dns query: %v", err)
	}
	c, err := net.DialTimeout("tcp4", sink, 5*time.Second)
	if err != nil {
		t.Fatalf("sink: %v", err)
	}
	c.SetDeadline(time.Now().Add(5 * time.Second))
	io.WriteString(c, canary.SinkHello+token+"/egress.tcp-ports\n")
	reply, _ := bufio.NewReader(c).ReadString('\n')
	c.Close()
	if !strings.HasPrefix(reply, canary.SinkReply) {
		t.Errorf("sink replied %q", reply)
	}

	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("canary serve: %v", err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("canary serve did not stop when its context ended")
	}
	f, err := os.Open(hits)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	got := map[string][]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var h canary.Hit
		if err := json.Unmarshal(sc.Bytes(), &h); err != nil {
			t.Fatalf("hits line %q: %v", sc.Text(), err)
		}
		if h.Token == token {
			got[h.Service] = append(got[h.Service], h.Probe)
		}
		if h.Service == canary.ServiceKubeAPI && h.Credential != canary.CredentialPlanted {
			t.Errorf("kube-api hit with credential %q, want the planted token recognised", h.Credential)
		}
	}
	for probe, svc := range map[string]string{"metadata.aws-imdsv1": canary.ServiceAWS, "metadata.aws-imds-ipv6": canary.ServiceAWS,
		"egress.dns-exfil": canary.ServiceDNS, "egress.tcp-ports": canary.ServiceTCP, "metadata.ecs-task-role": canary.ServiceECS,
		"metadata.alibaba": canary.ServiceAlibaba, "metadata.k8s-api": canary.ServiceKubeAPI} {
		if !slices.Contains(got[svc], probe) {
			t.Errorf("no %s hit with the token for %s in the hits file (got %v)", svc, probe, got)
		}
	}
}

// TestCanaryServeRefusesWildcard: 0.0.0.0 and [::] need --listen-any;
// nothing else than an IPv4 or IPv6 host:port is accepted.
func TestCanaryServeRefusesWildcard(t *testing.T) {
	for _, c := range []struct {
		addr string
		any  bool
		ok   bool
	}{
		{"127.0.0.1:" + strconv.Itoa(8053), false, true},
		{"0.0.0.0:8053", false, false},
		{"0.0.0.0:8053", true, true},
		{"localhost:8053", false, false},
		{"[::1]:8053", false, true},
		{"[::]:8053", false, false},
		{"[::]:8053", true, true},
		{"[fe80::1%lo]:8053", false, false},
		{"[::ffff:127.0.0.1]:8053", false, false},
	} {
		if err := checkListen("dns", c.addr, c.any); (err == nil) != c.ok {
			t.Errorf("checkListen(%q, listen-any %t) = %v, want ok %t", c.addr, c.any, err, c.ok)
		}
	}
	cmd := canaryCmd()
	cmd.SetOut(io.Discard)
	cmd.SetErr(io.Discard)
	cmd.SetArgs([]string{"serve", "--hits", filepath.Join(t.TempDir(), "h"), "--dns", "0.0.0.0:" + strconv.Itoa(8053)})
	if err := cmd.Execute(); err == nil || !strings.Contains(err.Error(), "--listen-any") {
		t.Errorf("serving on 0.0.0.0 without --listen-any: %v, want a refusal naming --listen-any", err)
	}
}

// TestCanaryServeOffersEveryService: `canary serve` has one address flag
// per declared canary service (canary.Services), the table `run` starts
// on its harness network (netharness TestHarnessServesEveryDeclaredCanary),
// and no listener flag of its own.
func TestCanaryServeOffersEveryService(t *testing.T) {
	other := []string{"hits", "duration", "listen-any", "max-hits", "kube-token", "outside", "zone", "help"}
	var listeners []string
	canaryServeCmd().Flags().VisitAll(func(f *pflag.Flag) {
		if !slices.Contains(other, f.Name) {
			listeners = append(listeners, f.Name)
		}
	})
	if want := canary.ServiceNames(); !slices.Equal(slices.Sorted(slices.Values(listeners)), slices.Sorted(slices.Values(want))) {
		t.Errorf("canary serve's listener flags are %v, the declared canaries %v", listeners, want)
	}
}

// TestCanaryServeEveryService starts every declared service on loopback
// through canary serve and finds each one's address printed.
func TestCanaryServeEveryService(t *testing.T) {
	args := []string{"serve", "--hits", filepath.Join(t.TempDir(), "hits"), "--duration", "20s"}
	want := map[string]string{}
	// One call for all the ports: each is held until all are found, so no
	// two services are handed the same one.
	ports := freePorts(t, len(canary.ServiceNames()))
	for i, name := range canary.ServiceNames() {
		addr := ports[i]
		if name == "icmp" {
			if os.Geteuid() != 0 {
				args = append(args, "--icmp", "")
				continue
			}
			addr = "127.0.0.1"
		}
		args = append(args, "--"+name, addr)
		want[name] = addr
	}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	cmd := canaryCmd()
	var out syncBuffer
	cmd.SetOut(&out)
	cmd.SetErr(io.Discard)
	cmd.SetArgs(args)
	done := make(chan error, 1)
	go func() { done <- cmd.ExecuteContext(ctx) }()
	deadline := time.Now().Add(15 * time.Second)
	for !strings.Contains(out.String(), "outside_addr:") && time.Now().Before(deadline) {
		select {
		case err := <-done:
			t.Fatalf("canary serve ended early: %v\n%s", err, out.String())
		case <-time.After(20 * time.Millisecond):
		}
	}
	for name, addr := range want {
		line := canaryPrintKey(name) + ": " + addr
		if !strings.Contains(out.String(), line) {
			t.Errorf("canary serve did not print %q:\n%s", line, out.String())
		}
	}
	if !strings.Contains(out.String(), "broker_token: scb") {
		t.Errorf("canary serve did not print the broker's token:\n%s", out.String())
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("canary serve: %v", err)
	}
}
