package e2e

import (
	"encoding/json"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/sandcheck/sandcheck/evidence"
	"github.com/sandcheck/sandcheck/netharness"
	"github.com/sandcheck/sandcheck/probes"
)

// wrapperProxyProbes selects the proxy-path probes.
const wrapperProxyProbes = "*.wrapper-proxy*"

// TestWrapperProxyPath holds every wrapper reference to the proxy path:
// srt's defaults, as root and as a user, refuse IP literals (its proxy on
// the harness network, network: proxy); its strict settings leave its proxy
// nothing to reach (network none); the wrappers without a proxy give the
// box none to try; and srt allowing two IP literals lets the box reach the
// harness's metadata and outside canaries through its proxy, which the
// canaries' records confirm (the negative control).
func TestWrapperProxyPath(t *testing.T) {
	const hit = "escaped through the wrapper's proxy"
	for target, want := range map[string]string{
		"wrapper-srt-allow-ip": hit,
		"wrapper-srt-root":     "refused",
		"wrapper-srt-user":     "refused",
		"wrapper-srt-strict":   "", // srt's proxy has no route: refused or unreachable
		// Network none: no outside address is handed out and the box has
		// only loopback (the egress probe), no proxy is named (both).
		"wrapper-bwrap":           "besides loopback|names no proxy",
		"wrapper-firejail-strict": "besides loopback|names no proxy",
		// On the harness network, with the harness's own proxy in the
		// environment (egress.connect-proxy's), but none of the wrapper's.
		"wrapper-firejail": "names no proxy",
	} {
		t.Run(target, func(t *testing.T) {
			requireWrapperTools(t)
			r := sandcheck(t, "run", "--target", "fixtures/targets/"+target+".yaml", "--quiet", "--probes", wrapperProxyProbes)
			rec := r.mustRecord(t)
			if len(rec.Errors) > 0 {
				t.Fatalf("harness errors: %v", rec.Errors)
			}
			if len(rec.Results) != 2 {
				t.Fatalf("%d results for %s, want 2", len(rec.Results), wrapperProxyProbes)
			}
			for i, res := range rec.Results {
				eff := rec.Effective(i)
				canary := map[string]string{"metadata.wrapper-proxy": "metadata-hit", "egress.wrapper-proxy-ip": "sink-hit"}[res.Probe]
				it, ok := hostItem(res, evidence.SourceCanary, canary)
				confirmed := ok && it.Indicates == probes.Escaped
				if want == hit {
					if res.Outcome != probes.Escaped || eff != probes.Escaped || !confirmed {
						t.Errorf("%s: %s (effective %s, canary %s confirmed %t): %s; want escaped, confirmed by the canary's record", res.Probe, res.Outcome, eff, canary, confirmed, res.Detail)
					}
					continue
				}
				if res.Outcome != probes.Blocked || eff != probes.Blocked || confirmed {
					t.Errorf("%s: %s (effective %s, canary hit %t): %s; want blocked", res.Probe, res.Outcome, eff, confirmed, res.Detail)
				}
				if !slices.ContainsFunc(strings.Split(want, "|"), func(w string) bool { return strings.Contains(res.Detail, w) }) {
					t.Errorf("%s: %q does not say %q", res.Probe, res.Detail, want)
				}
			}
			if want == hit && r.code != 1 {
				t.Errorf("exit %d, want 1 (no-ambient-cloud-identity and default-deny-egress fail)", r.code)
			}
		})
	}
}

// TestWrapperProxyReachesOnlyHarness proves where a wrapper with network
// proxy (and so its proxy) can send anything: a wrapper that records, from
// where it runs, its network namespace's links, addresses and routes, and
// the host's addresses (through this test's own network namespace, the
// host's), shows loopback and one veth whose only routes lead
// to a gateway on the host's harness bridge, the interface that also holds
// the harness's canary addresses; and every srt settings file of the
// references allows no domain but harness addresses.
func TestWrapperProxyReachesOnlyHarness(t *testing.T) {
	requireWrapperTools(t)
	dir := t.TempDir()
	script := `ip -o link show > ` + dir + `/link.$$; ip -o -4 addr show > ` + dir + `/addr.$$; ip -4 route show > ` + dir + `/route.$$; ` +
		`nsenter --net=/proc/` + strconv.Itoa(os.Getpid()) + `/ns/net ip -o -4 addr show > ` + dir + `/host.$$; exec "$@"`
	target := filepath.Join(t.TempDir(), "proxy-net.yaml")
	body := "schema: sandcheck.dev/target/v1\nname: wrapper-proxy-net\nrunner: wrapper\nprofile: no-network-transform\n" +
		"wrapper:\n  argv: [sh, -c, '" + script + "', sh, \"${ARGV}\"]\n  user: root\n  network: proxy\ntasks:\n  launch: task\n"
	if err := os.WriteFile(target, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	r := sandcheck(t, "run", "--target", target, "--quiet", "--probes", "egress.wrapper-proxy-ip")
	if rec := r.mustRecord(t); len(rec.Errors) > 0 {
		t.Fatalf("harness errors: %v", rec.Errors)
	}
	links, _ := filepath.Glob(filepath.Join(dir, "link.*"))
	if len(links) == 0 {
		t.Fatal("the wrapper recorded nothing: it did not run")
	}
	outside := (*netharness.Network)(nil).OutsideAddr()
	metadata := netip.MustParseAddrPort((*netharness.Network)(nil).MetadataAddr()).Addr()
	for _, l := range links {
		pid := strings.TrimPrefix(filepath.Ext(l), ".")
		read := func(name string) string {
			b, err := os.ReadFile(filepath.Join(dir, name+"."+pid))
			if err != nil {
				t.Fatal(err)
			}
			return string(b)
		}
		var names []string
		for _, line := range strings.Split(strings.TrimSpace(read("link")), "\n") {
			if f := strings.Fields(line); len(f) > 1 {
				names = append(names, strings.SplitN(strings.TrimSuffix(f[1], ":"), "@", 2)[0])
			}
		}
		if len(names) != 2 || names[0] != "lo" {
			t.Fatalf("links in the wrapper's namespace: %v, want lo and one veth", names)
		}
		veth := names[1]
		var addr netip.Prefix
		for _, line := range strings.Split(strings.TrimSpace(read("addr")), "\n") {
			f := strings.Fields(line)
			if len(f) < 4 || f[1] == "lo" {
				continue
			}
			if f[1] != veth || addr.IsValid() {
				t.Fatalf("addresses in the wrapper's namespace: %q, want one on %s", read("addr"), veth)
			}
			addr = netip.MustParsePrefix(f[3])
		}
		if !addr.IsValid() {
			t.Fatalf("no address on %s: %q", veth, read("addr"))
		}
		var gateway netip.Addr
		for _, line := range strings.Split(strings.TrimSpace(read("route")), "\n") {
			f := strings.Fields(line)
			switch {
			case len(f) >= 5 && f[0] == "default" && f[1] == "via" && f[3] == "dev" && f[4] == veth:
				gateway = netip.MustParseAddr(f[2])
			case len(f) >= 3 && f[0] == addr.Masked().String() && f[1] == "dev" && f[2] == veth:
			default:
				t.Errorf("route %q in the wrapper's namespace: want only the default via the harness gateway and the veth's own subnet", line)
			}
		}
		if !gateway.IsValid() || !addr.Masked().Contains(gateway) {
			t.Fatalf("default route via %v, want a gateway in %s", gateway, addr.Masked())
		}
		// The host interface holding the gateway holds the canaries too:
		// it is the harness's bridge, fenced (netharness/firewall.go).
		held := map[string][]netip.Addr{}
		for _, line := range strings.Split(strings.TrimSpace(read("host")), "\n") {
			if f := strings.Fields(line); len(f) >= 4 {
				held[f[1]] = append(held[f[1]], netip.MustParsePrefix(f[3]).Addr())
			}
		}
		bridge := ""
		for name, as := range held {
			if slices.Contains(as, gateway) {
				bridge = name
			}
		}
		if bridge == "" || !slices.Contains(held[bridge], outside) || !slices.Contains(held[bridge], metadata) {
			t.Errorf("the gateway %s is on host interface %q holding %v, want the harness bridge holding %s and %s", gateway, bridge, held[bridge], outside, metadata)
		}
	}

	// srt's allowed domains: harness addresses only, never a name (which
	// srt would resolve through the host's resolver).
	files, _ := filepath.Glob("../fixtures/targets/wrapper/srt-*.json")
	if len(files) < 2 {
		t.Fatalf("srt settings files: %v", files)
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var s struct {
			Network struct {
				AllowedDomains []string `json:"allowedDomains"`
			} `json:"network"`
		}
		if err := json.Unmarshal(b, &s); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		for _, d := range s.Network.AllowedDomains {
			if a, err := netip.ParseAddr(d); err != nil || (a != outside && a != metadata) {
				t.Errorf("%s allows %q: only the harness's addresses (%s, %s) may be allowed", f, d, outside, metadata)
			}
		}
	}
}

// proxyPathProbes are probes of the egress and metadata families whose
// destinations srt-allow-ip's allow-list permits (the outside address and
// the metadata address, as IP literals) and denies (the ECS endpoint, the
// package mirror), each tried directly and through srt's proxies.
var proxyPathProbes = map[string]struct {
	allowed bool
	canary  string // the canary item kind of a confirmed hit
}{
	"egress.tcp-ports":       {true, "sink-hit"},
	"egress.websocket":       {true, "sink-hit"},
	"metadata.aws-imdsv1":    {true, "metadata-hit"},
	"metadata.gcp":           {true, "metadata-hit"},
	"metadata.ecs-task-role": {false, "metadata-hit"},
	"egress.package-mirror":  {false, "sink-hit"},
}

// srtRoutes are the paths through srt's proxies every probe above tries:
// the target declares them (proxies:), srt names them in the box.
var srtRoutes = []string{
	"via-get 127.0.0.1:3128 (HTTP_PROXY,http_proxy)",
	"via-connect 127.0.0.1:3128 (HTTP_PROXY,http_proxy,HTTPS_PROXY,https_proxy,ALL_PROXY,all_proxy)",
	"via-socks5 127.0.0.1:3128 (ALL_PROXY,all_proxy)",
	"via-socks5 127.0.0.1:1080 (FTP_PROXY,ftp_proxy)",
}

// TestWrapperProxyPathEveryProbe holds the egress and metadata probes to
// the proxy path through srt: with srt allowing two IP literals, a
// destination it allows is reached directly by nothing (srt gives the box
// no route) but through its HTTP proxy and its SOCKS5 proxy, the probe
// says so path by path, and the canary's record of the probe's token
// names the paths it came by (the negative control: only the canary makes
// it an escape, the probe itself says inconclusive); a destination srt
// denies is refused on every path and no canary sees it, and srt's
// defaults (as root and as a user) refuse every destination on every path
// (the positive controls).
func TestWrapperProxyPathEveryProbe(t *testing.T) {
	requireWrapperTools(t)
	var sel []string
	for id := range proxyPathProbes {
		sel = append(sel, id)
	}
	slices.Sort(sel)
	for _, target := range []string{"wrapper-srt-allow-ip", "wrapper-srt-root", "wrapper-srt-user"} {
		t.Run(target, func(t *testing.T) {
			r := sandcheck(t, "run", "--target", "fixtures/targets/"+target+".yaml", "--quiet", "--probes", strings.Join(sel, ","))
			rec := r.mustRecord(t)
			if len(rec.Errors) > 0 {
				t.Fatalf("harness errors: %v", rec.Errors)
			}
			if len(rec.Results) != len(sel) {
				t.Fatalf("%d results, want %d", len(rec.Results), len(sel))
			}
			for i, res := range rec.Results {
				want, ok := proxyPathProbes[res.Probe]
				if !ok {
					t.Fatalf("result for unselected %s", res.Probe)
				}
				self, ok := hostItem(res, evidence.SourceProbe, "self-report")
				paths := self.Data["paths"]
				if !ok || !strings.HasPrefix(paths, "direct: blocked; ") {
					t.Errorf("%s: paths %q, want the direct path blocked first", res.Probe, paths)
				}
				allowed := want.allowed && target == "wrapper-srt-allow-ip"
				word := map[bool]string{true: "reached", false: "refused"}[allowed]
				for _, route := range srtRoutes {
					if !strings.Contains(paths, route+": "+word) {
						t.Errorf("%s: paths %q, want %q %s", res.Probe, paths, route, word)
					}
				}
				hit, confirmed := hostItem(res, evidence.SourceCanary, want.canary)
				eff := rec.Effective(i)
				if !allowed {
					// Blocked, or unconfirmed: no host path fact of a
					// wrapper's namespace confirms a block (netpath-none).
					if res.Outcome != probes.Blocked || eff != probes.Blocked && eff != evidence.Unconfirmed || confirmed {
						t.Errorf("%s: %s (effective %s, canary hit %t): %s; want blocked on every path", res.Probe, res.Outcome, eff, confirmed, res.Detail)
					}
					continue
				}
				if res.Outcome != probes.Inconclusive || eff != probes.Escaped || !confirmed || hit.Indicates != probes.Escaped {
					t.Errorf("%s: %s (effective %s, canary %s %t): %s; want the probe's inconclusive made an escape by the canary", res.Probe, res.Outcome, eff, want.canary, confirmed, res.Detail)
					continue
				}
				vias := strings.Split(hit.Data["via"], ",")
				for _, v := range []string{"via-connect", "via-get", "via-socks5"} {
					if !slices.Contains(vias, v) {
						t.Errorf("%s: the canary saw the paths %v, want %s among them", res.Probe, vias, v)
					}
				}
				if u := hit.Data["via_unconfirmed"]; u != "" {
					t.Errorf("%s: the probe says it reached its destination %s, which the canary did not see", res.Probe, u)
				}
				if slices.Contains(vias, "direct") {
					t.Errorf("%s: the canary saw a direct contact, but srt gives the box no route", res.Probe)
				}
			}
			if target == "wrapper-srt-allow-ip" && r.code != 1 {
				t.Errorf("exit %d, want 1 (no-ambient-cloud-identity and default-deny-egress fail)", r.code)
			}
		})
	}
}
