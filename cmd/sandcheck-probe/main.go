// Command sandcheck-probe is the static multi-call probe binary that runs
// inside a sandbox. It is built with CGO_ENABLED=0 and runs in a FROM-scratch
// image: no libc, no shell.
//
//	sandcheck-probe run --token T --params JSON  run the probes JSON lists, one JSON result line each
//	sandcheck-probe run --token T --params-file F   the same, JSON read from file F
//	sandcheck-probe list                     print the implemented probe IDs
//	sandcheck-probe hold [--max 30m]         idle init (PID 1) that reaps zombies
//	sandcheck-probe child <kind> ...         internal helpers re-executed by probes
//
// Exit codes: 0 when the probes ran (whatever their outcomes), 2 for a usage
// error or an unknown probe ID, 1 when results could not be written.
package main

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/netip"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sandcheck/sandcheck/internal/bounded"
	"github.com/sandcheck/sandcheck/output"
	"github.com/sandcheck/sandcheck/probes"
	"github.com/sandcheck/sandcheck/probes/impl"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

const usage = `usage:
  sandcheck-probe run --token T (--params JSON | --params-file FILE)
        JSON: {"schema":"sandcheck.dev/probe-params/v1","token":"T","probes":["ID",...],...} (probes.Params);
        --token repeats its token
  sandcheck-probe list
  sandcheck-probe hold [--max 30m]
`

func run(args []string, stdout, stderr io.Writer) int {
	if os.Geteuid() != os.Getuid() && !(len(args) == 2 && args[0] == "child" && args[1] == "euid") {
		// Running as the setuid canary (privilege.setuid-binaries): it
		// answers one question and does nothing else with the privilege.
		fmt.Fprintln(stderr, "sandcheck-probe: running setuid: only \"child euid\" is allowed")
		return 2
	}
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	switch args[0] {
	case "run":
		return runProbes(args[1:], stdout, stderr)
	case "list":
		for _, id := range impl.IDs() {
			fmt.Fprintln(stdout, id)
		}
		return 0
	case "hold":
		return hold(args[1:], stderr)
	case "child":
		return impl.Child(args[1:])
	}
	fmt.Fprintf(stderr, "sandcheck-probe: unknown command %q\n%s", args[0], usage)
	return 2
}

// safeArg is what the harness may pass as a token, run ID or marker: they end
// up in HTTP headers and file names, so nothing else is accepted.
var safeArg = regexp.MustCompile(`^[A-Za-z0-9._-]{0,128}$`)

// hostPathPattern is what the harness may pass as a host path (plain
// characters only); it must also be absolute and clean.
var hostPathPattern = regexp.MustCompile(`^/[A-Za-z0-9/._-]{1,511}$`)

func runProbes(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	fs.SetOutput(stderr)
	doc := fs.String("params", "", "the harness's parameters: one JSON document ("+probes.ParamsSchema+")")
	file := fs.String("params-file", "", "a file holding the harness's parameters, instead of --params (a wrapper that bounds the length of an argument)")
	tag := fs.String("token", "", "the parameters' token again, as a word of its own: the host's tracer finds the invocation by it in argv")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if (*doc == "") == (*file == "") {
		fmt.Fprint(stderr, "sandcheck-probe: run needs one of --params and --params-file\n", usage)
		return 2
	}
	raw := []byte(*doc)
	if *file != "" {
		var err error
		// At most one byte past the bound, which ParseParams refuses; a
		// link or anything but a regular file is refused here.
		if raw, err = bounded.ReadRegular(*file, probes.MaxParamsBytes); err != nil {
			fmt.Fprintf(stderr, "sandcheck-probe: reading the parameters file: %v\n", err)
			return 2
		}
	}
	p, err := probes.ParseParams(raw)
	if err != nil {
		fmt.Fprintf(stderr, "sandcheck-probe: %v\n", err)
		return 2
	}
	if *tag != p.Token {
		fmt.Fprintf(stderr, "sandcheck-probe: --token %q is not the parameters' token %q\n", *tag, p.Token)
		return 2
	}
	if p.ProbeDir == "" {
		p.ProbeDir = probes.ProbeMount
	}
	goAhead := &p.GoAhead
	pack := p.Pack != nil
	var packLim impl.PackLimits
	if pack {
		packLim = impl.PackLimits{MaxFiles: p.Pack.MaxFiles, MaxFileBytes: p.Pack.MaxFileBytes, MaxTotalBytes: p.Pack.MaxTotalBytes}
	}
	if pack && (p.OutputDir == "" || !filepath.IsAbs(p.OutputDir) || packLim.MaxFiles <= 0 || packLim.MaxFileBytes <= 0 || packLim.MaxTotalBytes <= 0) {
		fmt.Fprintln(stderr, "sandcheck-probe: pack needs an absolute output_dir and positive bounds")
		return 2
	}
	if *goAhead != "" {
		if !safeArg.MatchString(*goAhead) {
			fmt.Fprintf(stderr, "sandcheck-probe: go_ahead must match %s\n", safeArg)
			return 2
		}
		if err := waitGoAhead(filepath.Join(p.ProbeDir, probes.GoAheadDir, *goAhead), goAheadWait); err != nil {
			fmt.Fprintf(stderr, "sandcheck-probe: %v\n", err)
			return 2
		}
	}
	if p.HostHoney != "" && (!hostPathPattern.MatchString(p.HostHoney) || path.Clean(p.HostHoney) != p.HostHoney) {
		fmt.Fprintf(stderr, "sandcheck-probe: host_honey must be a clean absolute path, not %q\n", p.HostHoney)
		return 2
	}
	if p.InputsDir != "" && (!filepath.IsAbs(p.InputsDir) || filepath.Clean(p.InputsDir) != p.InputsDir) {
		fmt.Fprintf(stderr, "sandcheck-probe: inputs_dir must be a clean absolute path, not %q\n", p.InputsDir)
		return 2
	}
	if err := checkAddrs(p); err != nil {
		fmt.Fprintf(stderr, "sandcheck-probe: %v\n", err)
		return 2
	}
	for name, v := range map[string]string{"token": p.Token, "run_id": p.RunID, "marker": p.Marker, "broker_token": p.BrokerToken} {
		if !safeArg.MatchString(v) {
			fmt.Fprintf(stderr, "sandcheck-probe: %s must match %s\n", name, safeArg)
			return 2
		}
	}
	if p.Phase != "" && p.Phase != "plant" && p.Phase != "check" {
		fmt.Fprintf(stderr, "sandcheck-probe: phase must be plant or check, not %q\n", p.Phase)
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "sandcheck-probe: run takes no arguments after its flags (got %q): the probes are the parameters' probes list\n%s", fs.Arg(0), usage)
		return 2
	}
	ids := p.Probes
	if len(ids) == 0 {
		fmt.Fprint(stderr, "sandcheck-probe: run needs at least one probe ID in the parameters' probes list\n", usage)
		return 2
	}
	if len(ids) > probes.MaxResults {
		fmt.Fprintf(stderr, "sandcheck-probe: at most %d probes per run\n", probes.MaxResults)
		return 2
	}
	for _, id := range ids {
		if !impl.Known(id) {
			fmt.Fprintf(stderr, "sandcheck-probe: unknown probe ID %q (see sandcheck-probe list)\n", id)
			return 2
		}
	}
	enc := json.NewEncoder(stdout)
	for _, id := range ids {
		if id == p.HangBefore {
			// The harness's tests only: hang as a probe blocked in the
			// kernel would, until the harness cuts the task.
			time.Sleep(hangFor)
		}
		r, err := impl.Run(context.Background(), id, p)
		if err != nil {
			fmt.Fprintf(stderr, "sandcheck-probe: %v\n", err)
			return 2
		}
		if err := r.Validate(); err != nil {
			// Cannot happen (Run cleans results); never print a line the
			// host would reject along with every other line.
			r = probes.Result{Probe: id, Outcome: probes.Inconclusive, Detail: "result failed validation"}
		}
		if err := enc.Encode(r); err != nil {
			fmt.Fprintf(stderr, "sandcheck-probe: writing result of %s: %v\n", id, err)
			return 1
		}
	}
	if pack {
		return packOutput(stderr, p.OutputDir, packLim)
	}
	return 0
}

// packOutput writes the output folder as a framed base64 tar stream.
func packOutput(w io.Writer, dir string, lim impl.PackLimits) int {
	fmt.Fprintf(w, "\n%s\n", output.FrameBegin)
	// Lines of 76 characters: log drivers split long lines, and the
	// decoder skips newlines.
	enc := base64.NewEncoder(base64.StdEncoding, &lineWrap{w: w, width: 76})
	err := impl.Pack(enc, dir, lim)
	if cerr := enc.Close(); err == nil {
		err = cerr
	}
	fmt.Fprintf(w, "\n%s\n", output.FrameEnd)
	if err != nil {
		fmt.Fprintf(w, "sandcheck-probe: packing %s: %v\n", dir, err)
	}
	return 0
}

// hangFor is how long a test's hang (Params.HangBefore) lasts at most.
const hangFor = time.Hour

// goAheadWait bounds how long a task waits for the harness's go-ahead.
const goAheadWait = 60 * time.Second

// waitGoAhead waits until the harness creates path (a file in the read-only
// probe folder) or the bound passes. The harness creates it once its tracer
// watches the sandbox, so nothing a probe does runs unobserved.
func waitGoAhead(path string, bound time.Duration) error {
	deadline := time.Now().Add(bound)
	for delay := time.Millisecond; ; delay = min(2*delay, 20*time.Millisecond) {
		var st unix.Stat_t
		if err := unix.Fstatat(unix.AT_FDCWD, path, &st, unix.AT_SYMLINK_NOFOLLOW); err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("no go-ahead (%s) from the harness within %s", path, bound)
		}
		time.Sleep(delay)
	}
}

// zonePattern is what the harness may pass as a DNS zone.
var zonePattern = regexp.MustCompile(`^([a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?\.){0,8}[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$`)

// checkAddrs accepts only literal addresses: probes never resolve a name
// the harness gave them, so they reach exactly what they were told.
func checkAddrs(p probes.Params) error {
	for name, v := range map[string]string{"outside_addr": p.OutsideAddr, "gateway_addr": p.GatewayAddr, "neighbour_addr": p.NeighbourAddr} {
		if v == "" {
			continue
		}
		if a, err := netip.ParseAddr(v); err != nil || !a.Is4() {
			return fmt.Errorf("%s must be an IPv4 address, not %q", name, v)
		}
	}
	for name, v := range map[string]string{"resolver_addr": p.ResolverAddr, "other_resolver_addr": p.OtherResolverAddr, "mirror_addr": p.MirrorAddr, "dns_alt_addr": p.DNSAltAddr,
		"ecs_addr": p.ECSAddr, "alibaba_addr": p.AlibabaAddr, "dot_addr": p.DoTAddr, "doh_addr": p.DoHAddr, "proxy_addr": p.ProxyAddr, "broker_addr": p.BrokerAddr, "kube_api_addr": p.KubeAPIAddr, "kube_apiserver_addr": p.KubeAPIServerAddr,
		"neighbour_execd_addr": p.NeighbourExecdAddr, "ip_canary_addr": p.IPCanaryAddr} {
		if v == "" {
			continue
		}
		if ap, err := netip.ParseAddrPort(v); err != nil || !ap.Addr().Is4() {
			return fmt.Errorf("%s must be IPv4:PORT, not %q", name, v)
		}
	}
	if v := p.Outside6Addr; v != "" {
		if a, err := netip.ParseAddr(v); err != nil || !a.Is6() || a.Is4In6() || a.Zone() != "" {
			return fmt.Errorf("outside6_addr must be an IPv6 address, not %q", v)
		}
	}
	if v := p.Metadata6Addr; v != "" {
		if ap, err := netip.ParseAddrPort(v); err != nil || !ap.Addr().Is6() || ap.Addr().Is4In6() || ap.Addr().Zone() != "" {
			return fmt.Errorf("metadata6_addr must be [IPv6]:PORT, not %q", v)
		}
	}
	for _, v := range p.KubeletAddrs {
		if ap, err := netip.ParseAddrPort(v); err != nil || !ap.Addr().Is4() {
			return fmt.Errorf("kubelet_addrs must hold IPv4:PORT, not %q", v)
		}
	}
	for _, v := range p.KubeNodeNames {
		if len(v) > 253 || !zonePattern.MatchString(v) {
			return fmt.Errorf("kube_node_names must hold lower-case DNS names, not %q", v)
		}
	}
	if p.DNSZone != "" && !zonePattern.MatchString(p.DNSZone) {
		return fmt.Errorf("dns_zone must be a lower-case DNS name, not %q", p.DNSZone)
	}
	return nil
}

// lineWrap inserts a newline every width bytes.
type lineWrap struct {
	w     io.Writer
	width int
	col   int
}

func (l *lineWrap) Write(p []byte) (int, error) {
	n := 0
	for len(p) > 0 {
		k := min(len(p), l.width-l.col)
		m, err := l.w.Write(p[:k])
		n += m
		if err != nil {
			return n, err
		}
		p, l.col = p[k:], l.col+k
		if l.col == l.width {
			if _, err := l.w.Write([]byte{'\n'}); err != nil {
				return n, err
			}
			l.col = 0
		}
	}
	return n, nil
}
