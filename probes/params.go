package probes

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
)

// Params is what the harness hands a probe: one versioned JSON document
// (ParamsSchema), the value of the probe binary's --params, written by the
// engine (Encode) and strictly read by the probe binary (ParseParams). It is
// the one wire contract between them. Probes reach only addresses named
// here.
type Params struct {
	// Schema is ParamsSchema; any other value is refused.
	Schema string `json:"schema"`
	// Token is unique to one probe invocation; probes send it with every
	// canary contact and plant it in every marker, so host observations can be
	// joined to the probe that caused them.
	Token string `json:"token,omitempty"`
	// RunID names the sandcheck run.
	RunID string `json:"run_id,omitempty"`
	// MetadataAddr is host:port of the metadata service to try, as the harness
	// hands it (a canary it owns). Empty means the standard 169.254.169.254:80,
	// which in tests is also a harness canary.
	MetadataAddr string `json:"metadata_addr,omitempty"`
	// OutsideAddr is an IPv4 address standing for "outside" (the internet),
	// with TCP and UDP sinks, as the harness hands it (in tests a
	// documentation address the harness holds on its own bridge). Empty
	// means no outside address: egress probes then send nothing.
	OutsideAddr string `json:"outside_addr,omitempty"`
	// DNSZone is a zone only the harness's DNS canary answers; names under
	// it that resolve prove a query left the box.
	DNSZone string `json:"dns_zone,omitempty"`
	// ResolverAddr is host:port of the resolver the harness configured for
	// the sandbox (the runtime may front it with its own, e.g. Docker's
	// 127.0.0.11).
	ResolverAddr string `json:"resolver_addr,omitempty"`
	// OtherResolverAddr is host:port of a DNS server the sandbox was not
	// configured to use.
	OtherResolverAddr string `json:"other_resolver_addr,omitempty"`
	// DNSAltAddr is host:port of the harness's DNS canary on an alternate
	// port (not 53).
	DNSAltAddr string `json:"dns_alt_addr,omitempty"`
	// MirrorAddr is host:port of the package mirror the harness runs (an
	// HTTP sink), the destination a mirror-only profile grants.
	MirrorAddr string `json:"mirror_addr,omitempty"`
	// ECSAddr is host:port of the ECS container credentials endpoint the
	// harness runs (169.254.170.2:80 on its bridge). Empty means none: the
	// probe then sends nothing.
	ECSAddr string `json:"ecs_addr,omitempty"`
	// AlibabaAddr is host:port of the Alibaba Cloud metadata service the
	// harness runs (100.100.100.200:80 on its bridge). Empty means none: the
	// probe then sends nothing.
	AlibabaAddr string `json:"alibaba_addr,omitempty"`
	// Metadata6Addr is [host]:port of the IPv6 metadata service the harness
	// runs ([fd00:ec2::254]:80 on its bridge). Empty means none: the probe
	// then sends nothing.
	Metadata6Addr string `json:"metadata6_addr,omitempty"`
	// Outside6Addr is an IPv6 address standing for "outside", with a TCP
	// sink on port 80, that the harness holds (in the documentation range
	// 2001:db8::/32). Empty means none: the probe then sends nothing.
	Outside6Addr string `json:"outside6_addr,omitempty"`
	// KubeAPIAddr is host:port of the Kubernetes API canary the harness runs
	// (HTTPS, on its bridge), where the cluster DNS names of the API server
	// lead. Empty means none: the probe then sends nothing.
	KubeAPIAddr string `json:"kube_api_addr,omitempty"`
	// KubeAPIServerAddr is IPv4:port of the real API server of the
	// Kubernetes cluster the sandbox runs in, as the kubernetes runner reads
	// it from its kubeconfig (the cluster's own address, never a guess).
	// Empty means none: the kubernetes probes then send nothing to it.
	KubeAPIServerAddr string `json:"kube_apiserver_addr,omitempty"`
	// KubeletAddrs are IPv4:port of the kubelets of the nodes the sandbox
	// may run on, as the cluster reports them (each node's InternalIP and
	// kubelet endpoint port). Empty means none.
	KubeletAddrs []string `json:"kubelet_addrs,omitempty"`
	// KubeNodeNames are the names of the nodes the sandbox may run on, for
	// a probe to recognise one where the box should not learn it.
	KubeNodeNames []string `json:"kube_node_names,omitempty"`
	// GatewayAddr is the IPv4 address of the sandbox network's gateway, the
	// host's own side, where the harness runs token-recording listeners for
	// host services. Empty means none: the probe then sends nothing.
	GatewayAddr string `json:"gateway_addr,omitempty"`
	// NeighbourAddr is the IPv4 address of a neighbouring sandbox on the
	// same network with token-recording listeners. Empty means none.
	NeighbourAddr string `json:"neighbour_addr,omitempty"`
	// NeighbourExecdAddr is host:port of a neighbour sandbox's execd, as the
	// platform's lifecycle API names it (OpenSandbox's endpoint lookup for
	// port 44772 of a sandbox the harness made through the same API). Empty
	// means none: the probe then sends nothing.
	NeighbourExecdAddr string `json:"neighbour_execd_addr,omitempty"`
	// IPCanaryAddr is host:port of a token-recording TCP canary the harness
	// runs on its own address facing the sandbox's network, to be reached by
	// IP literal (no name leads to it). Empty means none: the probe then
	// sends nothing.
	IPCanaryAddr string `json:"ip_canary_addr,omitempty"`
	// DoTAddr is host:port of a DNS-over-TLS server the sandbox was not
	// configured to use. Empty means none.
	DoTAddr string `json:"dot_addr,omitempty"`
	// DoHAddr is host:port of a DNS-over-HTTPS server (path /dns-query)
	// the sandbox was not configured to use. Empty means none.
	DoHAddr string `json:"doh_addr,omitempty"`
	// ProxyAddr is host:port of the egress proxy the harness configured for
	// the sandbox (an HTTP CONNECT proxy, also named in HTTP_PROXY and
	// HTTPS_PROXY). Empty means none.
	ProxyAddr string `json:"proxy_addr,omitempty"`
	// BrokerAddr is host:port of the tool broker the harness runs, the one
	// endpoint a brokered task may call. Empty means none.
	BrokerAddr string `json:"broker_addr,omitempty"`
	// BrokerToken is the task's scoped broker credential, as the platform
	// hands it to the task.
	BrokerToken string `json:"broker_token,omitempty"`
	// ScopedKeySHA256 is the hex SHA-256 of the platform's scoped key (a
	// per-run honeytoken the target places in the box), so a probe can
	// recognise the key without being handed it.
	ScopedKeySHA256 string `json:"scoped_key_sha256,omitempty"`
	// Marker is the token a sequence probe plants in its first sandbox and
	// looks for in its second.
	Marker string `json:"marker,omitempty"`
	// Phase is "plant" or "check" for sequence probes, empty otherwise.
	Phase string `json:"phase,omitempty"`
	// HostHoney is the host path of a honeyfile the harness planted in the
	// run's own folder, which no sandbox mounts: a probe that reads it through
	// a path leading to the host's root (/proc/1/root) proves host reach.
	HostHoney string `json:"host_honey,omitempty"`
	// ProbeDir is where the runner delivered the probe binary (read-only); the
	// harness's own mount is not a finding.
	ProbeDir string `json:"probe_dir,omitempty"`
	// OutputDir is the folder inside the sandbox the target declares for the
	// task's output (empty: none); the output probes plant their artifacts
	// there.
	OutputDir string `json:"output_dir,omitempty"`
	// InputsDir is the folder inside the sandbox the target declares for the
	// task's inputs (empty: none); the harness filled it with files only it
	// knows the content of.
	InputsDir string `json:"inputs_dir,omitempty"`
	// GoAhead, when set, makes the probe binary wait for the go-ahead file
	// of this name in ProbeDir's go-ahead folder before running (a task
	// launched before the harness watches its sandbox).
	GoAhead string `json:"go_ahead,omitempty"`
	// Pack, when set, makes the probe binary write the output folder as a
	// framed base64 tar stream on stderr after the probes (the gated
	// release), within these bounds.
	Pack *PackBounds `json:"pack,omitempty"`
	// Bounds, when set, are how far the limit probes push: past the limits
	// the target declares (see Bounds). Nil or a zero field: the probe's
	// own default bound.
	Bounds *Bounds `json:"bounds,omitempty"`
	// HangBefore is for the harness's own tests only: the probe binary
	// hangs (sleeps for an hour) before running the probe of this ID, as a
	// probe blocked in the kernel would, so that a test can check how a
	// hung task is cut. Empty in every real run.
	HangBefore string `json:"hang_before,omitempty"`

	// The broker probes' block (targets' broker:, engine/broker.go).

	// BrokerTaskToken is the token the platform's broker minted for this
	// task, as the platform hands it to the task (for the harness's
	// reference broker; a harness-made test value). Empty: none.
	BrokerTaskToken string `json:"broker_task_token,omitempty"`
	// BrokerGrant is what that token was granted for and what the scope
	// probe tries beyond it (nil: no broker declared).
	BrokerGrant *BrokerGrant `json:"broker_grant,omitempty"`
	// WrapperProxy says the target declares that its wrapper filters the
	// box's egress through a proxy of its own (a wrapper target's network:
	// proxy, such as srt's HTTP proxy enforcing its allowed domains), which
	// the wrapper names to the box in HTTP_PROXY, HTTPS_PROXY or ALL_PROXY:
	// the proxy-path probes (egress.wrapper-proxy-ip,
	// metadata.wrapper-proxy) send the harness's outside and metadata
	// addresses through it, beside the direct path the other probes try.
	WrapperProxy bool `json:"wrapper_proxy,omitempty"`
	// WrapperProxies are the proxies the target declares its wrapper
	// announces to the box, as "http://IP:port" or "socks5://IP:port" on
	// loopback (WrapperProxyEndpoint's form). A probe tries a proxy the
	// box's environment names only when it is one of these.
	WrapperProxies []string `json:"wrapper_proxies,omitempty"`
	// Probes are the probes this invocation runs, in order (at most
	// MaxResults). They travel in this one document, never as a
	// command-line argument each: the command line stays six words
	// whatever the batch, which every wrapper passes on (firejail refuses
	// 128 arguments or more).
	Probes []string `json:"probes,omitempty"`
}

// BrokerGrant is the grant behind a task's broker token, as the harness
// made it: the one tenant, resource and operation it opens, the task's
// budget it must not outlive, and a neighbour resource and another tenant,
// both harness-made names, that it must not open.
type BrokerGrant struct {
	Tenant        string `json:"tenant"`
	Resource      string `json:"resource"`
	Operation     string `json:"operation"`
	OtherResource string `json:"other_resource"`
	OtherTenant   string `json:"other_tenant"`
	// BudgetSeconds is the task's time budget.
	BudgetSeconds int `json:"budget_seconds"`
	// RevocationBoundMillis is how soon after the harness revokes the
	// token the broker must refuse it (the target's revocation_bound).
	RevocationBoundMillis int `json:"revocation_bound_ms,omitempty"`
}

// HoneyPrefix starts the name of every honeyfile the harness plants on the host.
// Finding one from inside a sandbox proves host files are reachable.
const HoneyPrefix = ".sandcheck-honey-"

// CanaryProcPrefix starts the argv[0] of the canary process the harness runs
// on the host; seeing it from inside proves the host's PID namespace is shared.
const CanaryProcPrefix = "sandcheck-canary-proc-"

// SuidCanary is the file name, in the probe directory, of the setuid-root copy
// of the probe binary the harness delivers; it answers only "child euid".
const SuidCanary = "sandcheck-suid-canary"

// MarkerPrefix starts the name of every marker file a persistence probe plants.
const MarkerPrefix = ".sandcheck-marker-"

// TeardownPrefix starts the name of every file a teardown probe plants to
// see whether it outlives the sandbox; the token follows.
const TeardownPrefix = ".sandcheck-teardown-"

// Labels a teardown probe puts on whatever it creates through a container
// engine, so that the host's check after close finds it by the probe's token
// and the run's own sweeps find it by the run.
const (
	LabelTeardownToken = "sandcheck.teardown"
	LabelRun           = "sandcheck.run"
)

// OutputArtifactPrefix starts the name of every artifact one output probe
// run plants: its token, a dot and the probe's name within the family. The
// host joins what the release path shows to the probe by it.
func OutputArtifactPrefix(token, probeID string) string {
	return token + "." + strings.TrimPrefix(probeID, "output.")
}

// WrapperProxyEndpoint reads a proxy URL a target declares (or a box's
// environment names) into the form WrapperProxies holds: "http://IP:port"
// or "socks5://IP:port" (socks5h is SOCKS5 too), the host a loopback IP
// (localhost is taken as 127.0.0.1, never resolved), credentials and any
// path dropped. Anything else is an error: a proxy off loopback is never
// one the probe may dial.
func WrapperProxyEndpoint(v string) (string, error) {
	u, err := url.Parse(v)
	if err != nil {
		return "", errors.New("not a URL")
	}
	scheme := u.Scheme
	switch scheme {
	case "http", "socks5":
	case "socks5h":
		scheme = "socks5"
	default:
		return "", fmt.Errorf("scheme %q is not http, socks5 or socks5h", clipString(u.Scheme, 16))
	}
	host, port := u.Hostname(), u.Port()
	if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
		return "", fmt.Errorf("port %q is not a port", clipString(port, 16))
	}
	if host == "localhost" {
		host = "127.0.0.1"
	}
	ip, err := netip.ParseAddr(host)
	if err != nil || !ip.IsLoopback() {
		return "", fmt.Errorf("host %q is not on loopback", clipString(host, 64))
	}
	return scheme + "://" + net.JoinHostPort(ip.String(), port), nil
}

func clipString(s string, n int) string {
	if len(s) > n {
		return s[:n]
	}
	return s
}
