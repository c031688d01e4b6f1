package canary

import (
	"context"
	"net"
	"net/netip"
	"strconv"
	"testing"
	"time"

	"github.com/miekg/dns"
)

var testOutside = netip.MustParseAddr("198.51.100.10")

func newTestDNS(t *testing.T) (*DNS, *Recorder) {
	t.Helper()
	rec := NewRecorder(0, nil)
	return NewDNS(DNSOptions{Recorder: rec, Outside: testOutside}), rec
}

func query(name string, qtype uint16) *dns.Msg {
	m := new(dns.Msg)
	m.SetQuestion(dns.Fqdn(name), qtype)
	return m
}

func firstA(t *testing.T, m *dns.Msg) netip.Addr {
	t.Helper()
	for _, rr := range m.Answer {
		if a, ok := rr.(*dns.A); ok {
			addr, _ := netip.AddrFromSlice(a.A)
			return addr.Unmap()
		}
	}
	return netip.Addr{}
}

func TestDNSAnswers(t *testing.T) {
	d, _ := newTestDNS(t)
	meta := netip.MustParseAddr("169.254.169.254")
	cases := []struct {
		name  string
		qtype uint16
		rcode int
		want  netip.Addr
	}{
		{"outside.sandcheck.test", dns.TypeA, dns.RcodeSuccess, testOutside},
		{"OUTSIDE.Sandcheck.TEST", dns.TypeA, dns.RcodeSuccess, testOutside},
		{"metadata.sandcheck.test", dns.TypeA, dns.RcodeSuccess, meta},
		{"sc0123456789ab.egress.dns-exfil.x.sandcheck.test", dns.TypeA, dns.RcodeSuccess, testOutside},
		{"outside.sandcheck.test", dns.TypeAAAA, dns.RcodeSuccess, netip.Addr{}},
		{"nosuch.sandcheck.test", dns.TypeA, dns.RcodeNameError, netip.Addr{}},
		{"example.com", dns.TypeA, dns.RcodeRefused, netip.Addr{}},
		{"sandcheck.test.evil.com", dns.TypeA, dns.RcodeRefused, netip.Addr{}},
	}
	for _, c := range cases {
		resp, hit := d.Answer(query(c.name, c.qtype))
		if resp.Rcode != c.rcode || firstA(t, resp) != c.want {
			t.Errorf("%s %s: rcode %s answer %v, want %s %v", c.name, dns.TypeToString[c.qtype],
				dns.RcodeToString[resp.Rcode], resp.Answer, dns.RcodeToString[c.rcode], c.want)
		}
		if resp.RecursionAvailable {
			t.Errorf("%s: the canary claims to recurse", c.name)
		}
		if hit.Service != ServiceDNS || hit.Status != resp.Rcode || hit.Path == "" {
			t.Errorf("%s: hit %+v", c.name, hit)
		}
	}
}

func TestDNSExfilAttribution(t *testing.T) {
	d, _ := newTestDNS(t)
	for name, want := range map[string][2]string{
		"sc0123456789ab.egress.dns-exfil.x.sandcheck.test.": {"sc0123456789ab", "egress.dns-exfil"},
		"SC0123456789AB.egress.dns-exfil.x.sandcheck.test.": {"sc0123456789ab", "egress.dns-exfil"},
		"sc0123456789ab.x.sandcheck.test.":                  {"sc0123456789ab", ""},
		"sc0123456789ab.egress.dns-exfil.sandcheck.test.":   {"", ""},
		"sc0123456789ab.egress.dns-exfil.x.example.com.":    {"", ""},
		"bad!token.egress.dns-exfil.x.sandcheck.test.":      {"", ""},
	} {
		_, hit := d.Answer(query(name, dns.TypeA))
		if hit.Token != want[0] || hit.Probe != want[1] {
			t.Errorf("%s: token %q probe %q, want %q %q", name, hit.Token, hit.Probe, want[0], want[1])
		}
	}
}

func TestDNSRebinding(t *testing.T) {
	d, _ := newTestDNS(t)
	meta := netip.MustParseAddr("169.254.169.254")
	name := "rebind-abc.sandcheck.test"
	if r, _ := d.Answer(query(name, dns.TypeAAAA)); firstA(t, r).IsValid() {
		t.Errorf("AAAA answered with an A record")
	}
	for i, want := range []netip.Addr{testOutside, meta, meta} {
		r, _ := d.Answer(query(name, dns.TypeA))
		if got := firstA(t, r); got != want {
			t.Errorf("lookup %d: %v, want %v", i+1, got, want)
		}
	}
	if r, _ := d.Answer(query("rebind-other.sandcheck.test", dns.TypeA)); firstA(t, r) != testOutside {
		t.Errorf("a second rebinding name did not start at the outside address")
	}
}

func TestDNSBounds(t *testing.T) {
	d, _ := newTestDNS(t)
	for i := range MaxRebindNames + 10 {
		d.Answer(query("rebind-"+strconv.Itoa(i)+".sandcheck.test", dns.TypeA))
	}
	if len(d.rebind) > MaxRebindNames {
		t.Errorf("remembered %d rebinding names, cap %d", len(d.rebind), MaxRebindNames)
	}
	// Past the cap a new name gets the metadata address at once: never a
	// false "the filter held".
	if r, _ := d.Answer(query("rebind-new.sandcheck.test", dns.TypeA)); firstA(t, r) != netip.MustParseAddr("169.254.169.254") {
		t.Errorf("past the cap: %v", r.Answer)
	}
	m := query("outside.sandcheck.test", dns.TypeA)
	m.Question = append(m.Question, m.Question[0])
	if r, _ := d.Answer(m); r.Rcode != dns.RcodeFormatError {
		t.Errorf("two questions: %s, want FORMERR", dns.RcodeToString[r.Rcode])
	}
	m = query("outside.sandcheck.test", dns.TypeA)
	m.Opcode = dns.OpcodeUpdate
	if r, _ := d.Answer(m); r.Rcode != dns.RcodeNotImplemented {
		t.Errorf("update: %s, want NOTIMP", dns.RcodeToString[r.Rcode])
	}
}

// TestServeDNSLoopback answers real clients over UDP and TCP and survives
// garbage on both.
func TestServeDNSLoopback(t *testing.T) {
	d, rec := newTestDNS(t)
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	// An ephemeral port free for both transports: take a UDP one and retry.
	var s *DNSServer
	var err error
	for range 10 {
		pc, lerr := net.ListenPacket("udp4", "127.0.0.1:0")
		if lerr != nil {
			t.Fatal(lerr)
		}
		addr := pc.LocalAddr().String()
		pc.Close()
		if s, err = ServeDNS(ctx, addr, d, nil); err == nil {
			break
		}
	}
	if err != nil {
		t.Fatalf("serving dns on loopback: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := s.Close(ctx); err != nil {
			t.Errorf("closing: %v", err)
		}
	})
	for _, garbage := range [][]byte{{0}, []byte("not dns at all"), make([]byte, 600)} {
		c, _ := net.Dial("udp4", s.Addr())
		c.Write(garbage)
		c.Close()
		c, err := net.DialTimeout("tcp4", s.Addr(), time.Second)
		if err == nil {
			c.Write(append([]byte{0, byte(len(garbage))}, garbage...))
			c.Close()
		}
	}
	for _, netw := range []string{"udp", "tcp"} {
		cl := &dns.Client{Net: netw, Timeout: 3 * time.Second}
		r, _, err := cl.ExchangeContext(ctx, query("sc0123456789ab.egress.dns-exfil.x.sandcheck.test", dns.TypeA), s.Addr())
		if err != nil {
			t.Fatalf("%s query after garbage: %v", netw, err)
		}
		if firstA(t, r) != testOutside {
			t.Errorf("%s: answer %v", netw, r.Answer)
		}
	}
	hits := rec.ByToken("sc0123456789ab")
	if len(hits) != 2 || hits[0].Transport != "udp" || hits[1].Transport != "tcp" || hits[0].Local != s.Addr() {
		t.Errorf("hits %+v, want one udp and one tcp on %s", hits, s.Addr())
	}
}

// FuzzDNSAnswer feeds arbitrary bytes through the path a packet takes:
// unpack, answer, pack. Nothing may panic, and every answer must pack.
func FuzzDNSAnswer(f *testing.F) {
	for _, m := range []*dns.Msg{
		query("outside.sandcheck.test", dns.TypeA),
		query("sc0123456789ab.egress.dns-exfil.x.sandcheck.test", dns.TypeTXT),
		query("rebind-1.sandcheck.test", dns.TypeANY),
		query("example.com", dns.TypeMX),
	} {
		b, _ := m.Pack()
		f.Add(b)
	}
	f.Add([]byte{})
	d := NewDNS(DNSOptions{Outside: testOutside})
	f.Fuzz(func(t *testing.T, b []byte) {
		var m dns.Msg
		if err := m.Unpack(b); err != nil {
			return
		}
		resp, hit := d.Answer(&m)
		if len(hit.Path) > MaxFieldLen || len(hit.Method) > MaxFieldLen {
			t.Fatalf("unbounded hit %+v", hit)
		}
		resp.Truncate(dns.MinMsgSize)
		if _, err := resp.Pack(); err != nil {
			t.Fatalf("answer does not pack: %v\n%v", err, resp)
		}
	})
}

// TestDNSFilterAnswersOnlyAllowed: a filtering resolver resolves the
// mirror and refuses every other name, exfiltration names included, and
// records its hits as dns-filter, never as the canary.
func TestDNSFilterAnswersOnlyAllowed(t *testing.T) {
	rec := NewRecorder(0, nil)
	mirror := netip.MustParseAddr("198.51.100.80")
	d := NewDNS(DNSOptions{Recorder: rec, Outside: testOutside, Mirror: mirror, Filter: true, Allow: []string{MirrorLabel}})
	resp, hit := d.Answer(query("mirror."+DefaultZone, dns.TypeA))
	if got := firstA(t, resp); got != mirror || hit.Service != ServiceDNSFilter {
		t.Errorf("mirror: answer %s service %s, want %s from %s", got, hit.Service, mirror, ServiceDNSFilter)
	}
	for _, name := range []string{"tok123.egress.dns-exfil.x." + DefaultZone, "outside." + DefaultZone, DefaultZone, "rebind-1." + DefaultZone, "example.com"} {
		resp, hit := d.Answer(query(name, dns.TypeA))
		if resp.Rcode != dns.RcodeRefused || len(resp.Answer) > 0 || hit.Service != ServiceDNSFilter {
			t.Errorf("%s: rcode %s, %d answers, service %s; want REFUSED, none, %s", name, dns.RcodeToString[resp.Rcode], len(resp.Answer), hit.Service, ServiceDNSFilter)
		}
	}
	// A filter that grants nothing (the broker-only and proxy-only
	// profiles) refuses the canary zone too, as a filter, not the canary.
	none := NewDNS(DNSOptions{Recorder: rec, Outside: testOutside, Mirror: mirror, Filter: true})
	for _, name := range []string{"mirror." + DefaultZone, "tok123.egress.dns-exfil.x." + DefaultZone} {
		if resp, hit := none.Answer(query(name, dns.TypeA)); resp.Rcode != dns.RcodeRefused || hit.Service != ServiceDNSFilter {
			t.Errorf("filter granting nothing, %s: rcode %s, service %s; want REFUSED, %s", name, dns.RcodeToString[resp.Rcode], hit.Service, ServiceDNSFilter)
		}
	}
	// The canary itself resolves the mirror too.
	c := NewDNS(DNSOptions{Outside: testOutside, Mirror: mirror})
	if resp, hit := c.Answer(query("mirror."+DefaultZone, dns.TypeA)); firstA(t, resp) != mirror || hit.Service != ServiceDNS {
		t.Errorf("canary: mirror answer %v service %s", resp.Answer, hit.Service)
	}
}

// TestMetadataHostnames: the canary answers the cloud metadata host names
// with the metadata address, as a cloud resolver does; a filtering
// resolver refuses them.
func TestMetadataHostnames(t *testing.T) {
	md := netip.MustParseAddr("169.254.169.254")
	canary := NewDNS(DNSOptions{Metadata: md})
	filter := NewDNS(DNSOptions{Metadata: md, Filter: true, Allow: []string{MirrorLabel}})
	for _, name := range MetadataHostnames {
		q := new(dns.Msg)
		q.SetQuestion(name, dns.TypeA)
		r, hit := canary.Answer(q)
		if r.Rcode != dns.RcodeSuccess || len(r.Answer) != 1 || r.Answer[0].(*dns.A).A.String() != md.String() || hit.Path != name {
			t.Errorf("%s: canary answered %v", name, r)
		}
		if r, _ := filter.Answer(q); r.Rcode != dns.RcodeRefused {
			t.Errorf("%s: the filter answered %s, want REFUSED", name, dns.RcodeToString[r.Rcode])
		}
	}
	q := new(dns.Msg)
	q.SetQuestion("metadata.google.internal.evil.example.", dns.TypeA)
	if r, _ := canary.Answer(q); r.Rcode != dns.RcodeRefused {
		t.Errorf("a longer name answered %s", dns.RcodeToString[r.Rcode])
	}
}
