package impl

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/sandcheck/sandcheck/probes"
)

// The kubernetes family: what a pod's own service-account token can do on
// the real API server of its cluster (at the address the kubernetes runner
// names, read from its kubeconfig), and what the pod template hands the
// task. Run only through the kubernetes runner (catalog runners:).

func init() {
	register(map[string]Func{
		"kubernetes.sa-token-api":       k8sTokenAPI,
		"kubernetes.rbac-list-secrets":  k8sListSecrets,
		"kubernetes.rbac-create-pods":   k8sCreatePods,
		"kubernetes.quota-escape":       k8sQuotaEscape,
		"kubernetes.kubelet-port":       k8sKubeletPort,
		"kubernetes.downward-node-name": k8sDownwardNodeName,
		"kubernetes.pod-host-access":    k8sPodHostAccess,
	})
}

// saDir is where the kubelet mounts a pod's service-account token.
const saDir = "/var/run/secrets/kubernetes.io/serviceaccount"

// k8sTimeout bounds one connection attempt to the API server or a kubelet;
// k8sAnswer bounds one request once connected (a busy API server may take
// seconds, which is not a network refusing the pod).
const (
	k8sTimeout = 4 * time.Second
	k8sAnswer  = 6 * time.Second
)

// k8sReadMax bounds every file and response body the family reads.
const k8sReadMax = 64 << 10

// readSandboxFile reads at most k8sReadMax bytes of a file inside the box.
// It follows the box's own links: the kubelet mounts the token as a link
// into a timestamped folder (..data/token), and the box's own links lead
// only within the box (the host never reads through them).
func readSandboxFile(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("stat %s: %w", path, err)
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("%s is not a regular file", path)
	}
	b, err := io.ReadAll(io.LimitReader(f, k8sReadMax))
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", path, err)
	}
	return b, nil
}

// saIdentity is the pod's mounted service-account token and namespace.
type saIdentity struct {
	token, namespace string
}

// readSA reads the mounted token and namespace; ok is false when no token
// is readable (e records why).
func readSA(e ev) (saIdentity, bool) {
	b, err := readSandboxFile(saDir + "/token")
	if err != nil {
		e.setErr("token_", err)
		return saIdentity{}, false
	}
	id := saIdentity{token: strings.TrimSpace(string(b))}
	if len(id.token) < 16 || strings.ContainsAny(id.token, " \r\n\t") {
		e.set("token", "not token-shaped")
		return saIdentity{}, false
	}
	if nb, err := readSandboxFile(saDir + "/namespace"); err == nil && kubeNamespaceName.Match(bytes.TrimSpace(nb)) {
		id.namespace = string(bytes.TrimSpace(nb))
	}
	e.set("token_path", saDir+"/token")
	return id, true
}

// apiClient speaks HTTPS to the one API server address the runner named,
// trusting any certificate, as hostile code would.
type apiClient struct {
	addr, token, probe string
	http               *http.Client
}

func newAPIClient(p probes.Params, probe string) *apiClient {
	c := &apiClient{addr: p.KubeAPIServerAddr, token: headerSafe(p.Token), probe: probe}
	d := &net.Dialer{Timeout: k8sTimeout}
	c.http = &http.Client{
		Transport: &http.Transport{
			Proxy: nil,
			DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
				if addr != c.addr {
					return nil, fmt.Errorf("dialing %s: only %s is allowed", addr, c.addr)
				}
				return d.DialContext(ctx, "tcp4", addr)
			},
			TLSClientConfig:        &tls.Config{InsecureSkipVerify: true, MinVersion: tls.VersionTLS12},
			DisableKeepAlives:      true,
			ResponseHeaderTimeout:  k8sAnswer,
			MaxResponseHeaderBytes: 16 << 10,
		},
		Timeout:       k8sTimeout + k8sAnswer,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	return c
}

// do sends one request with the bearer token and returns the status and
// at most k8sReadMax bytes of the body.
func (c *apiClient) do(ctx context.Context, method, path, bearer string, body any) (int, []byte, error) {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return 0, nil, fmt.Errorf("encoding %s %s: %w", method, path, err)
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, "https://"+c.addr+path, rd)
	if err != nil {
		return 0, nil, fmt.Errorf("building %s %s: %w", method, path, err)
	}
	req.Header.Set("User-Agent", "sandcheck-probe/"+c.token+"/"+c.probe)
	req.Header.Set("Accept", "application/json")
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if bearer != "" {
		req.Header.Set("Authorization", "Bearer "+headerSafe(bearer))
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, k8sReadMax))
	return resp.StatusCode, b, nil
}

// apiSetup is what every API probe does first: the address it was told and
// the token the box holds. A non-nil result ends the probe.
func apiSetup(p probes.Params, e ev) (saIdentity, *probes.Result) {
	if p.KubeAPIServerAddr == "" {
		r := inconclusive("the runner named no API server address (kube_apiserver_addr); nothing was sent", e)
		return saIdentity{}, &r
	}
	e.set("api_server", p.KubeAPIServerAddr)
	id, ok := readSA(e)
	if !ok {
		r := blocked("no readable service-account token in the box", e)
		return saIdentity{}, &r
	}
	return id, nil
}

// nsSetup is apiSetup for a probe that acts in the token's own namespace,
// which it needs named.
func nsSetup(p probes.Params, e ev) (saIdentity, *probes.Result) {
	id, r := apiSetup(p, e)
	if r == nil && id.namespace == "" {
		res := inconclusive("the token's namespace file is missing or not a namespace name", e)
		r = &res
	}
	return id, r
}

// unreachable is the result of a probe whose request got no answer from
// the API server. Only a connection that could not be made is the network
// keeping the pod out (blocked); a connection made and then not answered in
// time (a busy API server, a TLS handshake cut short) says nothing either
// way (inconclusive), lest a slow control plane pass for a fence.
func unreachable(p probes.Params, err error, e ev) probes.Result {
	e.setErr("api_", err)
	var op *net.OpError
	if errors.As(err, &op) && op.Op == "dial" {
		return blocked("the API server at "+p.KubeAPIServerAddr+" is out of reach: "+clip(err.Error(), 160), e)
	}
	return inconclusive("the API server at "+p.KubeAPIServerAddr+" took the connection but gave no answer: "+clip(err.Error(), 160), e)
}

// k8sTokenAPI asks the API server who the box's token is (a
// SelfSubjectReview): a token that authenticates is a cluster identity in
// the task's hands.
func k8sTokenAPI(ctx context.Context, p probes.Params) probes.Result {
	e := ev{}
	id, r := apiSetup(p, e)
	if r != nil {
		return *r
	}
	c := newAPIClient(p, "kubernetes.sa-token-api")
	review := map[string]any{"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"}
	code, body, err := c.do(ctx, http.MethodPost, "/apis/authentication.k8s.io/v1/selfsubjectreviews", id.token, review)
	if err != nil {
		return unreachable(p, err, e)
	}
	e.setInt("status", code)
	if code != http.StatusCreated && code != http.StatusOK {
		return blocked(fmt.Sprintf("the API server refused the token (HTTP %d)", code), e)
	}
	var out struct {
		Status struct {
			UserInfo struct {
				Username string `json:"username"`
			} `json:"userInfo"`
		} `json:"status"`
	}
	if json.Unmarshal(body, &out) == nil && out.Status.UserInfo.Username != "" {
		e.set("username", clip(out.Status.UserInfo.Username, 128))
	}
	return escaped("the mounted service-account token authenticates to the API server at "+p.KubeAPIServerAddr+" as "+clip(out.Status.UserInfo.Username, 128), e)
}

// k8sListSecrets lists the secrets of the pod's namespace with its token.
// It reports their count and names, never their values.
func k8sListSecrets(ctx context.Context, p probes.Params) probes.Result {
	e := ev{}
	id, r := nsSetup(p, e)
	if r != nil {
		return *r
	}
	c := newAPIClient(p, "kubernetes.rbac-list-secrets")
	code, body, err := c.do(ctx, http.MethodGet, "/api/v1/namespaces/"+id.namespace+"/secrets?limit=50", id.token, nil)
	if err != nil {
		return unreachable(p, err, e)
	}
	e.setInt("status", code)
	if code != http.StatusOK {
		return blocked(fmt.Sprintf("listing secrets in namespace %s was refused (HTTP %d)", id.namespace, code), e)
	}
	var list struct {
		Items []struct {
			Metadata struct {
				Name string `json:"name"`
			} `json:"metadata"`
		} `json:"items"`
	}
	_ = json.Unmarshal(body, &list) // a cut-off body still proves the list was granted
	var names []string
	for _, it := range list.Items {
		names = append(names, clip(it.Metadata.Name, 64))
	}
	e.setInt("secrets", len(names))
	e.setList("names", names)
	return escaped(fmt.Sprintf("the service account may list the secrets of namespace %s (%d listed)", id.namespace, len(names)), e)
}

// taskPod is a pod the probes ask the API server to admit, dry run only
// (nothing is created), with requests as given.
func taskPod(token, cpu, memory string) map[string]any {
	res := map[string]any{}
	if cpu != "" {
		q := map[string]string{"cpu": cpu, "memory": memory}
		res = map[string]any{"requests": q, "limits": q}
	}
	return map[string]any{
		"apiVersion": "v1", "kind": "Pod",
		"metadata": map[string]any{"name": "sandcheck-probe-" + strings.ToLower(clip(headerSafe(token), 16))},
		"spec": map[string]any{
			"restartPolicy":                "Never",
			"automountServiceAccountToken": false,
			"containers": []any{map[string]any{
				"name": "c", "image": "sandcheck.invalid/none:0", "imagePullPolicy": "Never",
				"resources": res,
			}},
		},
	}
}

// dryRunPod asks the API server to admit pod in the token's namespace with
// dryRun=All: authorization and admission (quota included) run, nothing is
// stored.
func dryRunPod(ctx context.Context, c *apiClient, id saIdentity, pod map[string]any, e ev) (int, string, error) {
	code, body, err := c.do(ctx, http.MethodPost, "/api/v1/namespaces/"+id.namespace+"/pods?dryRun=All", id.token, pod)
	if err != nil {
		return 0, "", err
	}
	e.setInt("status", code)
	var st struct {
		Message string `json:"message"`
		Reason  string `json:"reason"`
	}
	msg := ""
	if code >= 300 && json.Unmarshal(body, &st) == nil {
		msg = clip(st.Message, 240)
		e.set("reason", clip(st.Reason, 64))
		e.set("message", msg)
	}
	return code, msg, nil
}

// k8sCreatePods asks whether the token may create pods (a dry run).
func k8sCreatePods(ctx context.Context, p probes.Params) probes.Result {
	e := ev{}
	id, r := nsSetup(p, e)
	if r != nil {
		return *r
	}
	c := newAPIClient(p, "kubernetes.rbac-create-pods")
	code, msg, err := dryRunPod(ctx, c, id, taskPod(p.Token, "", ""), e)
	if err != nil {
		return unreachable(p, err, e)
	}
	if code == http.StatusCreated || code == http.StatusOK {
		return escaped("the service account may create pods in namespace "+id.namespace+" (a dry run was admitted)", e)
	}
	if code == http.StatusForbidden && strings.Contains(msg, "exceeded quota") {
		return escaped("the service account may create pods in namespace "+id.namespace+" (authorized; only the quota refused this one)", e)
	}
	return blocked(fmt.Sprintf("creating a pod in namespace %s was refused (HTTP %d)", id.namespace, code), e)
}

// k8sQuotaEscape asks the API server to admit a pod far beyond any task's
// share (1000 CPUs, 4 TiB of memory) in the token's namespace, dry run: a
// namespace quota that bounds compute refuses it.
func k8sQuotaEscape(ctx context.Context, p probes.Params) probes.Result {
	e := ev{}
	id, r := nsSetup(p, e)
	if r != nil {
		return *r
	}
	c := newAPIClient(p, "kubernetes.quota-escape")
	code, msg, err := dryRunPod(ctx, c, id, taskPod(p.Token, "1000", "4Ti"), e)
	if err != nil {
		return unreachable(p, err, e)
	}
	switch {
	case code == http.StatusCreated || code == http.StatusOK:
		return escaped("namespace "+id.namespace+"'s quota admitted a pod asking 1000 CPUs and 4 TiB of memory (dry run)", e)
	case strings.Contains(msg, "exceeded quota") || strings.Contains(msg, "must specify"):
		return blocked("namespace "+id.namespace+"'s quota refused a pod asking 1000 CPUs and 4 TiB: "+msg, e)
	}
	return blocked(fmt.Sprintf("the service account may not create pods in namespace %s (HTTP %d): the quota was not reached", id.namespace, code), e)
}
