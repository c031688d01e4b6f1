package canary

import (
	"log/slog"
	"net"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/miekg/dns"
)

// DefaultZone is the harness zone the DNS canary is authoritative for. The
// .test TLD is reserved (RFC 6761): no real resolver will ever answer it.
const DefaultZone = "sandcheck.test"

// Names under the zone with a fixed meaning. Exfiltration names are
// "<token>.<probe-id>.x.<zone>"; rebinding names are "rebind-<id>.<zone>".
const (
	OutsideLabel  = "outside"
	MetadataLabel = "metadata"
	ExfilLabel    = "x"
	// MirrorLabel names the package mirror ("mirror.<zone>").
	MirrorLabel  = "mirror"
	RebindPrefix = "rebind-"
)

// Bounds of the DNS canary.
const (
	// MaxRebindNames bounds the rebinding names remembered; past it new
	// names get the second answer at once, which is never a false "safe".
	MaxRebindNames = 4096
	// maxInflight bounds queries answered at once; past it queries are
	// dropped unanswered, as a loaded resolver would.
	maxInflight = 256
	// DNSTimeout bounds reads and writes of one TCP connection.
	DNSTimeout = 5 * time.Second
	// maxTCPQueries bounds the queries served on one TCP connection.
	maxTCPQueries = 16
)

// DNSOptions configures a DNS canary.
type DNSOptions struct {
	// Recorder receives a hit for every query answered; required.
	Recorder *Recorder
	// Logger gets debug lines; nil discards.
	Logger *slog.Logger
	// Zone is the zone answered (DefaultZone if empty).
	Zone string
	// Outside is the harness-owned address "outside.<zone>", exfiltration
	// names and the first answer of a rebinding name resolve to.
	Outside netip.Addr
	// Metadata is the address "metadata.<zone>" and the second and later
	// answers of a rebinding name resolve to (169.254.169.254 if unset).
	Metadata netip.Addr
	// Mirror is the address "mirror.<zone>" resolves to (no answer when
	// unset).
	Mirror netip.Addr
	// KubeAPI is the address the Kubernetes API names (KubeAPIHostnames)
	// resolve to, as a pod's cluster DNS answers them; a canary without it
	// (or a filtering resolver) refuses them like any other name.
	KubeAPI netip.Addr
	// Filter makes the server a filtering resolver instead of a canary: it
	// answers only the names in Allow (relative to the zone, e.g. "mirror")
	// and refuses every other, in the zone or not, as a platform resolver
	// with an allowlist does. Its hits are recorded as ServiceDNSFilter: a
	// refused query went nowhere, so it is no escape.
	Filter bool
	// Allow are the names a filtering resolver answers (none: it refuses
	// every name); ignored without Filter.
	Allow []string
	// Now returns the time; nil means time.Now.
	Now func() time.Time
}

// DNS is an authoritative-only DNS canary for one zone. It records every
// query, answers names in its zone, refuses every other name (it never
// recurses, so nothing it receives goes anywhere else) and recognises a
// token and probe ID encoded in the labels of an exfiltration name.
type DNS struct {
	rec      *Recorder
	log      *slog.Logger
	zone     string // lower case, fully qualified
	outside  netip.Addr
	metadata netip.Addr
	mirror   netip.Addr
	kubeAPI  netip.Addr
	allow    map[string]bool // nil: a canary, not a filter
	now      func() time.Time
	inflight chan struct{}

	mu     sync.Mutex
	rebind map[string]int // name -> A lookups so far
}

// NewDNS returns a DNS canary.
func NewDNS(opts DNSOptions) *DNS {
	if opts.Recorder == nil {
		opts.Recorder = NewRecorder(0, nil)
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Zone == "" {
		opts.Zone = DefaultZone
	}
	if !opts.Metadata.IsValid() {
		opts.Metadata = netip.MustParseAddr("169.254.169.254")
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	var allow map[string]bool
	if opts.Filter {
		allow = make(map[string]bool, len(opts.Allow))
		for _, a := range opts.Allow {
			allow[strings.ToLower(strings.TrimSuffix(a, "."))] = true
		}
	}
	return &DNS{
		allow:    allow,
		mirror:   opts.Mirror,
		kubeAPI:  opts.KubeAPI,
		rec:      opts.Recorder,
		log:      opts.Logger,
		zone:     dns.Fqdn(strings.ToLower(opts.Zone)),
		outside:  opts.Outside,
		metadata: opts.Metadata,
		now:      opts.Now,
		inflight: make(chan struct{}, maxInflight),
		rebind:   make(map[string]int),
	}
}

// Zone is the zone answered, without the trailing dot.
func (d *DNS) Zone() string { return strings.TrimSuffix(d.zone, ".") }

// ServeDNS answers one query and records it. Malformed messages never get
// here (the server's accept function refuses them with FORMERR).
func (d *DNS) ServeDNS(w dns.ResponseWriter, req *dns.Msg) {
	select {
	case d.inflight <- struct{}{}:
		defer func() { <-d.inflight }()
	default:
		return
	}
	transport := "udp"
	if _, ok := w.RemoteAddr().(*net.TCPAddr); ok {
		transport = "tcp"
	}
	resp, hit := d.Answer(req)
	hit.Remote = w.RemoteAddr().String()
	hit.Local = w.LocalAddr().String()
	hit.Transport = transport
	d.rec.Record(hit)
	if transport == "udp" {
		resp.Truncate(udpSize(req))
	}
	if err := w.WriteMsg(resp); err != nil {
		d.log.Debug("dns canary: writing answer", "remote", hit.Remote, "err", err)
	}
}

// udpSize is the largest answer the client accepts over UDP.
func udpSize(req *dns.Msg) int {
	if o := req.IsEdns0(); o != nil && o.UDPSize() > dns.MinMsgSize {
		return min(int(o.UDPSize()), 1232)
	}
	return dns.MinMsgSize
}

// Answer decides the reply to req and the hit that records it (without the
// addresses, which only the transport knows). It never fails: anything it
// cannot answer gets an error code.
func (d *DNS) Answer(req *dns.Msg) (*dns.Msg, Hit) {
	resp := new(dns.Msg)
	resp.SetReply(req)
	resp.Authoritative = true
	resp.RecursionAvailable = false
	resp.Compress = true
	hit := Hit{Time: d.now().UTC(), Service: ServiceDNS, Method: "?"}
	if d.allow != nil {
		hit.Service = ServiceDNSFilter
	}
	if req.Opcode != dns.OpcodeQuery {
		resp.SetRcode(req, dns.RcodeNotImplemented)
		resp.Authoritative = false
		hit.Method = "opcode-" + dns.OpcodeToString[req.Opcode]
		hit.Status = resp.Rcode
		return resp, hit
	}
	if len(req.Question) != 1 {
		resp.SetRcode(req, dns.RcodeFormatError)
		resp.Authoritative = false
		hit.Status = resp.Rcode
		return resp, hit
	}
	q := req.Question[0]
	name := strings.ToLower(q.Name)
	hit.Method = clip(dns.Type(q.Qtype).String())
	hit.Path = clip(name)
	hit.Token, hit.Probe = d.exfil(name)
	d.answer(resp, q.Qtype, name)
	hit.Status = resp.Rcode
	return resp, hit
}

// answer fills resp for one question already lower-cased.
func (d *DNS) answer(resp *dns.Msg, qtype uint16, name string) {
	if c := resp.Question[0].Qclass; c != dns.ClassINET && c != dns.ClassANY {
		resp.Rcode = dns.RcodeRefused
		resp.Authoritative = false
		return
	}
	if d.allow == nil && isMetadataHostname(name) && (qtype == dns.TypeA || qtype == dns.TypeANY) && d.metadata.Is4() {
		// A cloud resolver's answer for its metadata host names.
		resp.Authoritative = false
		resp.Answer = []dns.RR{&dns.A{
			Hdr: dns.RR_Header{Name: resp.Question[0].Name, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: 0},
			A:   d.metadata.AsSlice(),
		}}
		return
	}
	if d.allow == nil && d.kubeAPI.Is4() && slices.Contains(KubeAPIHostnames, name) {
		// A cluster DNS's answer for the API server's service names.
		resp.Authoritative = false
		if qtype == dns.TypeA || qtype == dns.TypeANY {
			resp.Answer = []dns.RR{&dns.A{
				Hdr: dns.RR_Header{Name: resp.Question[0].Name, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: 0},
				A:   d.kubeAPI.AsSlice(),
			}}
		}
		return
	}
	if !dns.IsSubDomain(d.zone, name) {
		// Not ours, and we never recurse: nothing leaves through us.
		resp.Rcode = dns.RcodeRefused
		resp.Authoritative = false
		return
	}
	rel := strings.TrimSuffix(strings.TrimSuffix(name, d.zone), ".")
	if d.allow != nil && !d.allow[rel] {
		resp.Rcode = dns.RcodeRefused
		resp.Authoritative = false
		return
	}
	var addr netip.Addr
	switch {
	case rel == MirrorLabel:
		addr = d.mirror
	case rel == "" || rel == OutsideLabel:
		addr = d.outside
	case rel == MetadataLabel:
		addr = d.metadata
	case strings.HasSuffix(rel, "."+ExfilLabel):
		addr = d.outside
	case strings.HasPrefix(rel, RebindPrefix) && !strings.Contains(rel, "."):
		addr = d.rebindAnswer(name, qtype)
	default:
		resp.Rcode = dns.RcodeNameError
		resp.Ns = []dns.RR{d.soa()}
		return
	}
	switch {
	case qtype == dns.TypeSOA && rel == "":
		resp.Answer = []dns.RR{d.soa()}
	case (qtype == dns.TypeA || qtype == dns.TypeANY) && addr.Is4():
		resp.Answer = []dns.RR{&dns.A{
			Hdr: dns.RR_Header{Name: resp.Question[0].Name, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: 0},
			A:   addr.AsSlice(),
		}}
	default:
		resp.Ns = []dns.RR{d.soa()} // NODATA
	}
}

// rebindAnswer gives a rebinding name's first A lookup the outside address
// and every later one the metadata address: a filter that checks the name
// once and connects later is fooled the way DNS rebinding fools it.
func (d *DNS) rebindAnswer(name string, qtype uint16) netip.Addr {
	d.mu.Lock()
	defer d.mu.Unlock()
	n, seen := d.rebind[name]
	if !seen && len(d.rebind) >= MaxRebindNames {
		return d.metadata
	}
	if qtype != dns.TypeA && qtype != dns.TypeANY {
		if n == 0 {
			return d.outside
		}
		return d.metadata
	}
	d.rebind[name] = n + 1
	if n == 0 {
		return d.outside
	}
	return d.metadata
}

// exfil reads "<token>.<probe-id>.x.<zone>" (the probe ID may itself hold
// dots). A name of any other shape carries no attribution.
func (d *DNS) exfil(name string) (token, probe string) {
	rel, ok := strings.CutSuffix(name, "."+ExfilLabel+"."+d.zone)
	if !ok {
		return "", ""
	}
	tok, pr, _ := strings.Cut(rel, ".")
	return splitAttribution(tok + "/" + pr)
}

func (d *DNS) soa() dns.RR {
	return &dns.SOA{
		Hdr:     dns.RR_Header{Name: d.zone, Rrtype: dns.TypeSOA, Class: dns.ClassINET, Ttl: 0},
		Ns:      "ns." + d.zone,
		Mbox:    "hostmaster." + d.zone,
		Serial:  1,
		Refresh: 3600, Retry: 600, Expire: 86400, Minttl: 0,
	}
}
