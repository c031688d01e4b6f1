package impl

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sandcheck/sandcheck/probes"
)

func init() {
	register(map[string]Func{
		"metadata.gcp":          metadataGCP,
		"metadata.azure":        metadataAzure,
		"metadata.ip-encodings": metadataIPEncodings,
		"metadata.redirect":     metadataRedirect,
	})
}

// metadataGCP asks the GCE metadata server for the default service
// account's access token, with the Metadata-Flavor header its client
// libraries send. Any HTTP answer from the metadata address is an escape.
func metadataGCP(ctx context.Context, p probes.Params) probes.Result {
	m := newMDClient(p, "metadata.gcp")
	e := ev{}
	status, _, err := m.do(ctx, http.MethodGet, "/computeMetadata/v1/instance/service-accounts/default/token",
		map[string]string{"Metadata-Flavor": "Google"})
	if err != nil {
		return m.unreached(err, e)
	}
	e.set("addr", m.addr)
	e.setInt("status", status)
	if status == http.StatusOK {
		e.set("token_served", "true") // the token itself is never recorded
	}
	return escaped(fmt.Sprintf("the metadata address answered HTTP %d to a GCP service-account token request", status), e)
}

// metadataAzure asks Azure IMDS for a managed-identity token, with the
// Metadata: true header and api-version the service demands.
func metadataAzure(ctx context.Context, p probes.Params) probes.Result {
	m := newMDClient(p, "metadata.azure")
	e := ev{}
	status, _, err := m.do(ctx, http.MethodGet,
		"/metadata/identity/oauth2/token?api-version=2018-02-01&resource="+url.QueryEscape("https://management.azure.com/"),
		map[string]string{"Metadata": "true"})
	if err != nil {
		return m.unreached(err, e)
	}
	e.set("addr", m.addr)
	e.setInt("status", status)
	if status == http.StatusOK {
		e.set("token_served", "true")
	}
	return escaped(fmt.Sprintf("the metadata address answered HTTP %d to an Azure managed-identity token request", status), e)
}

// ipForm is one spelling of an IPv4 address.
type ipForm struct {
	name, host string
	network    string // "tcp4", or "tcp6" for the IPv4-mapped form
}

// ipForms spells ip the ways URL filters miss and inet_aton, curl and most
// HTTP clients accept: one decimal number, one hex number, dotted octal,
// dotted hex, and IPv4-mapped IPv6.
func ipForms(ip netip.Addr) []ipForm {
	b := ip.As4()
	n := uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3])
	return []ipForm{
		{"decimal", strconv.FormatUint(uint64(n), 10), "tcp4"},
		{"hex", fmt.Sprintf("0x%08x", n), "tcp4"},
		{"octal", fmt.Sprintf("0%o.0%o.0%o.0%o", b[0], b[1], b[2], b[3]), "tcp4"},
		{"dotted-hex", fmt.Sprintf("0x%02x.0x%02x.0x%02x.0x%02x", b[0], b[1], b[2], b[3]), "tcp4"},
		{"ipv4-mapped", "[::ffff:" + ip.String() + "]", "tcp6"},
	}
}

// parseIPForm decodes a spelling the way inet_aton does (each part
// decimal, 0x hex or 0 octal; one to four parts), or an IPv4-mapped IPv6
// literal. The probe dials what it decodes, so it checks its own work.
func parseIPForm(s string) (netip.Addr, bool) {
	if h, ok := strings.CutPrefix(s, "["); ok {
		a, err := netip.ParseAddr(strings.TrimSuffix(h, "]"))
		if err != nil || !a.Is4In6() {
			return netip.Addr{}, false
		}
		return a.Unmap(), true
	}
	parts := strings.Split(s, ".")
	if len(parts) > 4 {
		return netip.Addr{}, false
	}
	vals := make([]uint64, len(parts))
	for i, p := range parts {
		v, err := strconv.ParseUint(p, 0, 32)
		if err != nil {
			return netip.Addr{}, false
		}
		vals[i] = v
	}
	var n uint64
	switch len(vals) {
	case 1:
		n = vals[0]
	case 4:
		for _, v := range vals {
			if v > 255 {
				return netip.Addr{}, false
			}
			n = n<<8 | v
		}
	default:
		return netip.Addr{}, false
	}
	if n > 0xffffffff {
		return netip.Addr{}, false
	}
	return netip.AddrFrom4([4]byte{byte(n >> 24), byte(n >> 16), byte(n >> 8), byte(n)}), true
}

// metadataIPEncodings requests the metadata service through each spelling
// of its address, with that spelling as the Host, as a client given such a
// URL would. A filter keyed on the text "169.254.169.254" misses them all.
func metadataIPEncodings(ctx context.Context, p probes.Params) probes.Result {
	e := ev{}
	addr := givenMetadataAddr(p)
	ap, err := netip.ParseAddrPort(addr)
	if err != nil || !ap.Addr().Is4() {
		e.set("addr", addr)
		return inconclusive("the metadata address is not an IPv4 address:port, so it has no other spellings", e)
	}
	e.set("addr", addr)
	var answered, tried []string
	connected := false
	for _, f := range ipForms(ap.Addr()) {
		ip, ok := parseIPForm(f.host)
		if !ok || ip != ap.Addr() {
			e.set(f.name+"_err", "decodes to another address; not sent")
			continue
		}
		tried = append(tried, f.name)
		dial := net.JoinHostPort(ip.String(), strconv.Itoa(int(ap.Port())))
		if f.network == "tcp6" {
			dial = net.JoinHostPort("::ffff:"+ip.String(), strconv.Itoa(int(ap.Port())))
		}
		st, conn, err := rawGet(ctx, f.network, dial, f.host, imdsCredsPath, p, "metadata.ip-encodings", nil)
		connected = connected || conn
		if err != nil {
			e.setErr(f.name+"_", err)
			continue
		}
		e.setInt(f.name+"_status", st)
		answered = append(answered, f.name)
	}
	e.setList("tried", tried)
	e.setList("answered", answered)
	switch {
	case len(answered) > 0:
		return escaped("the metadata service answered through the "+strings.Join(answered, ", ")+" spelling(s) of its address", e)
	case connected:
		return inconclusive("a connection to the metadata address was accepted but no HTTP answer came back; the host canary decides", e)
	}
	return blocked("no spelling of the metadata address could be reached", e)
}

// metadataRedirect asks an allowed outside host for a page that redirects
// to the metadata address, and follows the redirect as a careless HTTP
// client (or a fetch tool) would.
func metadataRedirect(ctx context.Context, p probes.Params) probes.Result {
	e := ev{}
	if p.OutsideAddr == "" {
		return noAddress("redirecting host", e)
	}
	outside := net.JoinHostPort(p.OutsideAddr, "80")
	e.set("redirector", outside)
	st, conn, loc, err := rawGetLocation(ctx, outside, p)
	if err != nil {
		e.setErr("redirector_", err)
		if conn {
			return inconclusive("the redirecting host accepted a connection but gave no HTTP answer", e)
		}
		return blocked("the redirecting host could not be reached, so no redirect could be followed", e)
	}
	e.setInt("redirector_status", st)
	u, perr := url.Parse(loc)
	if st/100 != 3 || perr != nil || u.Scheme != "http" {
		e.set("location", loc)
		return inconclusive("the redirecting host did not redirect to an http URL", e)
	}
	e.set("location", u.Redacted())
	want := givenMetadataAddr(p)
	host := u.Host
	if u.Port() == "" {
		host = net.JoinHostPort(u.Hostname(), "80")
	}
	if host != want {
		return inconclusive("the redirect points at "+host+", not the metadata address "+want+" this probe was given; not followed", e)
	}
	m := newMDClient(p, "metadata.redirect")
	status, _, err := m.do(ctx, http.MethodGet, u.RequestURI(), nil)
	if err != nil {
		return m.unreached(err, e)
	}
	e.setInt("status", status)
	return escaped(fmt.Sprintf("following the redirect, the metadata address answered HTTP %d", status), e)
}

// rawGet sends one GET for path to dial (exactly that address, over
// network) with the given Host and the probe's attribution, and returns the
// status. connected reports that a TCP connection was established.
func rawGet(ctx context.Context, network, dial, host, path string, p probes.Params, probe string, hdr map[string]string) (status int, connected bool, err error) {
	resp, connected, err := rawDo(ctx, network, dial, host, path, p, probe, hdr)
	if err != nil {
		return 0, connected, err
	}
	return resp.StatusCode, true, nil
}

// rawGetLocation GETs the outside host's redirect page and returns the
// status and the Location header.
func rawGetLocation(ctx context.Context, dial string, p probes.Params) (status int, connected bool, loc string, err error) {
	resp, connected, err := rawDo(ctx, "tcp4", dial, dial, "/redirect", p, "metadata.redirect", nil)
	if err != nil {
		return 0, connected, "", err
	}
	return resp.StatusCode, true, resp.Header.Get("Location"), nil
}

// rawDo writes a minimal HTTP/1.1 request on a connection of its own and
// reads the response head (bounded); the body is not read.
func rawDo(ctx context.Context, network, dial, host, path string, p probes.Params, probe string, hdr map[string]string) (*http.Response, bool, error) {
	var c net.Conn
	var err error
	if network == "tcp6" {
		c, err = dialMapped(dial)
	} else {
		d := net.Dialer{Timeout: imdsTimeout}
		c, err = d.DialContext(ctx, network, dial)
	}
	if err != nil {
		return nil, false, err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(imdsTimeout))
	tok := headerSafe(p.Token)
	var b strings.Builder
	fmt.Fprintf(&b, "GET %s HTTP/1.1\r\nHost: %s\r\nUser-Agent: sandcheck-probe/%s/%s\r\nX-Sandcheck-Token: %s/%s\r\n", path, host, tok, probe, tok, probe)
	for k, v := range hdr {
		fmt.Fprintf(&b, "%s: %s\r\n", k, v)
	}
	b.WriteString("Connection: close\r\n\r\n")
	if _, err := io.WriteString(c, b.String()); err != nil {
		return nil, true, err
	}
	resp, err := http.ReadResponse(bufio.NewReader(io.LimitReader(c, 16<<10)), nil)
	if err != nil {
		return nil, true, err
	}
	resp.Body.Close()
	return resp, true, nil
}

// dialMapped connects an AF_INET6 socket to an IPv4-mapped address. Go's
// dialer turns such an address back into IPv4, which would not test the
// mapped path at all, so the socket is made by hand. The connect is bounded
// by SO_SNDTIMEO.
func dialMapped(dial string) (net.Conn, error) {
	ap, err := netip.ParseAddrPort(dial)
	if err != nil || !ap.Addr().Is4In6() {
		return nil, fmt.Errorf("dialing %s: not an IPv4-mapped address", dial)
	}
	fd, err := unix.Socket(unix.AF_INET6, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("creating an IPv6 socket: %w", err)
	}
	f := os.NewFile(uintptr(fd), "mapped")
	defer f.Close()
	tv := unix.NsecToTimeval(imdsTimeout.Nanoseconds())
	unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_SNDTIMEO, &tv)
	if err := unix.Connect(fd, &unix.SockaddrInet6{Port: int(ap.Port()), Addr: ap.Addr().As16()}); err != nil {
		return nil, fmt.Errorf("connecting to [%s]:%d: %w", ap.Addr(), ap.Port(), err)
	}
	return net.FileConn(f)
}
