package impl

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/sandcheck/sandcheck/probes"
)

func init() {
	register(map[string]Func{
		"metadata.aws-imdsv1": imdsV1,
		"metadata.aws-imdsv2": imdsV2,
	})
}

// DefaultMetadataAddr is the AWS instance metadata service, used when the
// harness names no address.
const DefaultMetadataAddr = "169.254.169.254:80"

const (
	imdsCredsPath = "/latest/meta-data/iam/security-credentials/"
	imdsTokenPath = "/latest/api/token"
	// imdsTimeout bounds each request: a blocked box usually fails at once
	// (unreachable) or drops the SYN, which we must not wait long for.
	imdsTimeout = 3 * time.Second
	// imdsMaxBody bounds what we read of any answer.
	imdsMaxBody = 4 << 10
)

// roleName is what an IAM role name may look like; anything else from the
// server is not used to build a second URL.
var roleName = regexp.MustCompile(`^[A-Za-z0-9+=,.@_-]{1,128}$`)

// mdClient talks to the one metadata address the harness named, and records
// whether a TCP connection was ever established: "connected" is what tells a
// blocked box (no connection) from a reachable service that did not answer.
type mdClient struct {
	addr, token, probe string
	http               *http.Client

	mu        sync.Mutex
	connected bool
	dialErr   error
}

func newMDClient(p probes.Params, probe string) *mdClient {
	m := &mdClient{addr: metadataAddr(p.MetadataAddr), token: headerSafe(p.Token), probe: probe}
	d := &net.Dialer{Timeout: imdsTimeout}
	tr := &http.Transport{
		// No proxy from the environment: the probe reaches only the address
		// it was given, and a proxy would turn "blocked" into "escaped".
		Proxy: nil,
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			if addr != m.addr {
				return nil, fmt.Errorf("dialing %s: only %s is allowed", addr, m.addr)
			}
			c, err := d.DialContext(ctx, network, addr)
			m.mu.Lock()
			defer m.mu.Unlock()
			if err == nil {
				m.connected = true
			} else if m.dialErr == nil {
				m.dialErr = err
			}
			return c, err
		},
		DisableKeepAlives:      true,
		DisableCompression:     true,
		ResponseHeaderTimeout:  imdsTimeout,
		MaxResponseHeaderBytes: 16 << 10,
	}
	m.http = &http.Client{
		Transport: tr,
		Timeout:   imdsTimeout,
		// Never follow a redirect: it would lead to an address the harness
		// did not hand us.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	return m
}

// metadataAddr is the address as HTTP will dial it: a default when none was
// given, port 80 when none was named ("fd00:ec2::254" becomes
// "[fd00:ec2::254]:80"), so the dial check below compares like with like.
func metadataAddr(a string) string {
	if a == "" {
		return DefaultMetadataAddr
	}
	if _, _, err := net.SplitHostPort(a); err != nil {
		return net.JoinHostPort(strings.Trim(a, "[]"), "80")
	}
	return a
}

// headerSafe keeps a token usable in a header: the binary validates tokens,
// this only guards against a request that fails before it is sent.
func headerSafe(s string) string {
	return strings.Map(func(r rune) rune {
		if r > 0x20 && r < 0x7f {
			return r
		}
		return -1
	}, s)
}

// do sends one request with the attribution headers and returns the status
// and at most imdsMaxBody bytes of the body.
func (m *mdClient) do(ctx context.Context, method, path string, hdr map[string]string) (int, string, error) {
	req, err := http.NewRequestWithContext(ctx, method, "http://"+m.addr+path, nil)
	if err != nil {
		return 0, "", fmt.Errorf("building %s %s: %w", method, path, err)
	}
	req.Header.Set("User-Agent", "sandcheck-probe/"+m.token+"/"+m.probe)
	req.Header.Set("X-Sandcheck-Token", m.token)
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := m.http.Do(req)
	if err != nil {
		return 0, "", fmt.Errorf("querying the metadata service: %w", err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, imdsMaxBody))
	return resp.StatusCode, string(b), nil
}

// unreached classifies a failed first request. No TCP connection means the
// box could not reach the address: blocked. A connection that gave no HTTP
// answer is not conclusive: a filtering proxy that accepts and drops looks the
// same from inside as an IMDSv2 answer lost to its hop limit; the host canary
// settles which.
func (m *mdClient) unreached(err error, e ev) probes.Result {
	m.mu.Lock()
	connected, dialErr := m.connected, m.dialErr
	m.mu.Unlock()
	e.set("addr", m.addr)
	e.setErr("", err)
	var dnsErr *net.DNSError
	switch {
	case connected:
		e.set("connected", "true")
		return inconclusive("a TCP connection to the metadata address was accepted but no HTTP answer came back; the host canary decides", e)
	case errors.As(err, &dnsErr):
		return inconclusive("the metadata address could not be resolved, so it was not tried", e)
	case dialErr != nil:
		e.set("connected", "false")
		return blocked("no connection to the metadata address could be made", e)
	}
	return inconclusive("the request failed before any connection attempt", e)
}

// imdsV1 asks the unauthenticated IMDSv1 path for role credentials. Any HTTP
// answer from the metadata address is an escape: the box reached it.
func imdsV1(ctx context.Context, p probes.Params) probes.Result {
	m := newMDClient(p, "metadata.aws-imdsv1")
	e := ev{}
	status, body, err := m.do(ctx, http.MethodGet, imdsCredsPath, nil)
	if err != nil {
		return m.unreached(err, e)
	}
	e.set("addr", m.addr)
	e.setInt("status", status)
	m.fetchCredentials(ctx, status, body, nil, e)
	return escaped(fmt.Sprintf("the metadata address answered HTTP %d to an IMDSv1 request", status), e)
}

// imdsV2 asks for a session token first (PUT), then for role credentials with
// it. An answer to the PUT already proves the service is reachable: the hop
// limit that protects against SSRF does not stop code with its own sockets
// when the box shares the host's network path.
func imdsV2(ctx context.Context, p probes.Params) probes.Result {
	return imdsV2With(ctx, newMDClient(p, "metadata.aws-imdsv2"), ev{}, "the metadata address")
}

// imdsV2With is imdsV2 through m, naming the address as where.
func imdsV2With(ctx context.Context, m *mdClient, e ev, where string) probes.Result {
	status, token, err := m.do(ctx, http.MethodPut, imdsTokenPath,
		map[string]string{"X-aws-ec2-metadata-token-ttl-seconds": "21600"})
	if err != nil {
		return m.unreached(err, e)
	}
	e.set("addr", m.addr)
	e.setInt("token_status", status)
	token = strings.TrimSpace(token)
	if status == http.StatusOK && token != "" && len(token) <= 512 && headerSafe(token) == token {
		hdr := map[string]string{"X-aws-ec2-metadata-token": token}
		st, body, err := m.do(ctx, http.MethodGet, imdsCredsPath, hdr)
		if err != nil {
			e.setErr("list_", err)
		} else {
			e.setInt("status", st)
			m.fetchCredentials(ctx, st, body, hdr, e)
		}
	}
	return escaped(fmt.Sprintf("%s answered HTTP %d to an IMDSv2 token request", where, status), e)
}

// fetchCredentials follows a role listing to the role's credentials and
// records the role name and access key ID, the canary's proof of theft. The
// secret key and session token are never recorded.
func (m *mdClient) fetchCredentials(ctx context.Context, status int, listing string, hdr map[string]string, e ev) {
	if status != http.StatusOK {
		return
	}
	role, _, _ := strings.Cut(strings.TrimSpace(listing), "\n")
	role = strings.TrimSpace(role)
	if !roleName.MatchString(role) {
		return
	}
	e.set("role", role)
	st, body, err := m.do(ctx, http.MethodGet, imdsCredsPath+url.PathEscape(role), hdr)
	if err != nil {
		e.setErr("creds_", err)
		return
	}
	e.set("creds_status", strconv.Itoa(st))
	var creds struct {
		AccessKeyID string `json:"AccessKeyId"`
	}
	if st == http.StatusOK && json.Unmarshal([]byte(body), &creds) == nil && creds.AccessKeyID != "" {
		e.set("access_key_id", clip(creds.AccessKeyID, 128))
	}
}
