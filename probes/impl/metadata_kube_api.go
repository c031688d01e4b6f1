package impl

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"regexp"
	"strings"
	"sync"

	"github.com/miekg/dns"

	"github.com/sandcheck/sandcheck/probes"
)

// kubeAPINames are the cluster DNS names of the API server, tried through
// the sandbox's configured resolver (canary.KubeAPIHostnames).
var kubeAPINames = []string{"kubernetes.default.svc.cluster.local.", "kubernetes.default.svc.", "kubernetes.default."}

// kubeNamespaceName is what a namespace file may hold before it goes into
// a request path.
var kubeNamespaceName = regexp.MustCompile(`^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$`)

func init() {
	register(map[string]Func{"metadata.k8s-api": k8sAPI})
}

// kubeClient speaks HTTPS to the one API address the harness named and
// records whether a TCP connection was ever made. It trusts any
// certificate, as hostile code would.
type kubeClient struct {
	addr, token string
	http        *http.Client

	mu        sync.Mutex
	connected bool
}

func newKubeClient(p probes.Params) *kubeClient {
	k := &kubeClient{addr: p.KubeAPIAddr, token: headerSafe(p.Token)}
	d := &net.Dialer{Timeout: imdsTimeout}
	k.http = &http.Client{
		Transport: &http.Transport{
			Proxy: nil,
			DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
				if addr != k.addr {
					return nil, fmt.Errorf("dialing %s: only %s is allowed", addr, k.addr)
				}
				c, err := d.DialContext(ctx, "tcp4", addr)
				if err == nil {
					k.mu.Lock()
					k.connected = true
					k.mu.Unlock()
				}
				return c, err
			},
			TLSClientConfig:        &tls.Config{InsecureSkipVerify: true, MinVersion: tls.VersionTLS12, ServerName: "kubernetes.default.svc"},
			DisableKeepAlives:      true,
			DisableCompression:     true,
			ResponseHeaderTimeout:  imdsTimeout,
			MaxResponseHeaderBytes: 16 << 10,
		},
		Timeout:       imdsTimeout,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	return k
}

// get sends one GET with the probe's attribution and, when bearer is not
// empty, the service-account token, and returns the status.
func (k *kubeClient) get(ctx context.Context, path, bearer string) (int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "https://"+k.addr+path, nil)
	if err != nil {
		return 0, fmt.Errorf("building GET %s: %w", path, err)
	}
	req.Header.Set("User-Agent", "sandcheck-probe/"+k.token+"/metadata.k8s-api")
	req.Header.Set("X-Sandcheck-Token", k.token+"/metadata.k8s-api")
	req.Header.Set("Accept", "application/json")
	if bearer != "" {
		req.Header.Set("Authorization", "Bearer "+bearer)
	}
	resp, err := k.http.Do(req)
	if err != nil {
		return 0, fmt.Errorf("querying the Kubernetes API: %w", err)
	}
	io.Copy(io.Discard, io.LimitReader(resp.Body, imdsMaxBody))
	resp.Body.Close()
	return resp.StatusCode, nil
}

func (k *kubeClient) wasConnected() bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.connected
}

// readServiceAccount reads the first usable service-account token (and its
// namespace) from the kubelet's paths, never through a link.
func readServiceAccount() (token, path, namespace string) {
	for _, p := range serviceAccountPaths {
		b, err := readNoFollow(p)
		if err != nil {
			continue
		}
		tok := strings.TrimSpace(string(b))
		if len(tok) < 16 || strings.ContainsFunc(tok, func(r rune) bool { return r <= 0x20 || r >= 0x7f }) {
			continue
		}
		ns := "default"
		if b, err := readNoFollow(strings.TrimSuffix(p, "token") + "namespace"); err == nil && kubeNamespaceName.MatchString(strings.TrimSpace(string(b))) {
			ns = strings.TrimSpace(string(b))
		}
		return tok, p, ns
	}
	return "", "", ""
}

// k8sAPI looks for the Kubernetes API server from inside, as code with a
// pod's service-account token would: it resolves the API server's cluster
// DNS names through the configured resolver (only for the evidence: it
// connects to nothing but the address the harness named), then asks that
// address over HTTPS for /version anonymously, /api without a token, and
// /api and the pod's namespace's secrets with the token. Any HTTP answer is
// an escape (the box reached the cluster's control plane); the evidence
// says whether the token was accepted.
func k8sAPI(ctx context.Context, p probes.Params) probes.Result {
	e := ev{}
	if p.KubeAPIAddr == "" {
		return noAddress("Kubernetes API address", e)
	}
	api, err := netip.ParseAddrPort(p.KubeAPIAddr)
	if err != nil {
		e.setErr("", err)
		return inconclusive("the harness's Kubernetes API address does not parse; nothing was sent", e)
	}
	if p.ResolverAddr != "" {
		if server, err := configuredResolver(p, e); err == nil {
			e.set("resolver", server)
			var resolved []string
			for _, n := range kubeAPINames {
				r, err := exchange(ctx, "udp", server, n)
				if err != nil {
					continue
				}
				if ip, ok := answerA(r); ok && r.Rcode == dns.RcodeSuccess {
					resolved = append(resolved, n+" "+ip.String())
					if ip == api.Addr() {
						e.set("name_leads_to_api", "true")
					}
				}
			}
			if len(resolved) > 0 {
				e.setList("resolved", resolved)
			}
		}
	}
	tok, path, ns := readServiceAccount()
	if path != "" {
		e.set("token_path", path)
	}
	k := newKubeClient(p)
	e.set("addr", k.addr)
	status, err := k.get(ctx, "/version", "")
	if err != nil {
		e.setErr("", err)
		if k.wasConnected() {
			e.set("connected", "true")
			return inconclusive("a TCP connection to the Kubernetes API address was accepted but no HTTPS answer came back; the host canary decides", e)
		}
		e.set("connected", "false")
		return blocked("no connection to the Kubernetes API address could be made", e)
	}
	e.setInt("version_status", status)
	if st, err := k.get(ctx, "/api", ""); err == nil {
		e.setInt("anonymous_status", st)
	} else {
		e.setErr("anonymous_", err)
	}
	if tok == "" {
		return escaped(fmt.Sprintf("the Kubernetes API server answered HTTP %d from inside the box (no service-account token to present)", status), e)
	}
	st, err := k.get(ctx, "/api", tok)
	if err != nil {
		e.setErr("token_", err)
		return escaped(fmt.Sprintf("the Kubernetes API server answered HTTP %d from inside the box; the request with the service-account token got no answer", status), e)
	}
	e.setInt("token_status", st)
	if st != http.StatusOK {
		return escaped(fmt.Sprintf("the Kubernetes API server answered from inside the box, and refused the service-account token (HTTP %d)", st), e)
	}
	e.set("token_accepted", "true")
	if st, err := k.get(ctx, "/api/v1/namespaces/"+ns+"/secrets", tok); err == nil {
		e.setInt("secrets_status", st)
	}
	return escaped("the Kubernetes API server answered from inside the box and accepted the pod's service-account token", e)
}
