package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"os/signal"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/sandcheck/sandcheck/canary"
)

// canaryCloseTimeout bounds stopping the listeners.
const canaryCloseTimeout = 10 * time.Second

// canaryOptions are the flags of `sandcheck canary serve`.
type canaryOptions struct {
	// addrs are the addresses of each declared canary service
	// (canary.Services), by name: one flag each.
	addrs     map[string]*[]string
	kubeToken []string
	outside   string
	zone      string
	hits      string
	duration  time.Duration
	listenAny bool
	maxHits   int
}

// canaryDefaults are the services canary serve starts unless told
// otherwise, and where.
var canaryDefaults = map[string][]string{
	"metadata": {"127.0.0.1:8169"},
	"dns":      {"127.0.0.1:8053"},
	"sink":     {"127.0.0.1:8080"},
	"udp-sink": {"127.0.0.1:8123"},
}

// canaryPrintKey is the line canary serve prints a service's address
// under.
func canaryPrintKey(name string) string {
	switch name {
	case "sink":
		return "sink_tcp"
	case "udp-sink":
		return "sink_udp"
	}
	return strings.ReplaceAll(name, "-", "_") + "_addr"
}

func canaryCmd() *cobra.Command {
	c := &cobra.Command{
		Use:   "canary",
		Short: "Run sandcheck's canaries outside a run",
	}
	c.AddCommand(canaryServeCmd())
	return c
}

func canaryServeCmd() *cobra.Command {
	var o canaryOptions
	c := &cobra.Command{
		Use:   "serve --hits FILE [flags]",
		Short: "Serve the metadata, DNS, Kubernetes API and sink canaries and write every hit to a file",
		Long: `Serve runs the canaries sandcheck runs for itself, the same declared
services (the fake cloud metadata services: AWS, GCP and Azure, ECS
task-role credentials, Alibaba Cloud; a fake Kubernetes API server over TLS;
the DNS canary authoritative for the harness zone, also over TLS and HTTPS;
TCP and UDP sinks, an ICMP observer; the package mirror, a host-service
sink, the egress proxy and the tool broker) on the IPv4 or IPv6 addresses
you name, one flag per service, for sandboxes sandcheck does not start
itself: point the sandbox at them, run the probes, and read the hits.

The Kubernetes API canary accepts the --kube-token tokens as service-account
tokens (plant one in the sandbox); without any it makes one and prints it.
The TLS listeners use a certificate made at start for their address.

Every hit is written to --hits as one JSON line, as it arrives. By default
every listener is on loopback; a wildcard address (0.0.0.0) is refused
unless --listen-any is given, since it would expose the canaries to every
network the host is on. An empty address turns a listener off.

It stops on SIGINT or SIGTERM, or after --duration.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			if o.duration > 0 {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, o.duration)
				defer cancel()
			}
			log := slog.New(slog.NewTextHandler(cmd.ErrOrStderr(), &slog.HandlerOptions{Level: slog.LevelWarn}))
			if err := serveCanaries(ctx, o, cmd.OutOrStdout(), log); err != nil {
				return harness(err)
			}
			return nil
		},
	}
	f := c.Flags()
	o.addrs = map[string]*[]string{}
	for _, svc := range canary.Services {
		v := new([]string)
		o.addrs[svc.Name] = v
		addr := "HOST:PORT"
		if svc.Name == "icmp" {
			addr = "ADDRESS"
		}
		f.StringSliceVar(v, svc.Name, canaryDefaults[svc.Name], addr+" of "+svc.Help+"; repeatable; empty for none")
	}
	f.StringSliceVar(&o.kubeToken, "kube-token", nil, "service-account token the Kubernetes API canary accepts; repeatable (default: one made and printed)")
	f.StringVar(&o.outside, "outside", "", "IPv4 address the DNS canary gives for outside.<zone> and exfiltration names (default: the first sink's host)")
	f.StringVar(&o.zone, "zone", canary.DefaultZone, "zone the DNS canary is authoritative for")
	f.StringVar(&o.hits, "hits", "", "file to append every hit to, as JSON lines (required)")
	f.DurationVar(&o.duration, "duration", 0, "stop after this long (0: until SIGINT or SIGTERM)")
	f.BoolVar(&o.listenAny, "listen-any", false, "allow wildcard addresses such as 0.0.0.0")
	f.IntVar(&o.maxHits, "max-hits", canary.DefaultMaxHits, "hits written at most; later ones are counted and dropped")
	c.MarkFlagRequired("hits")
	return c
}

// checkListen refuses what is not an IPv4 or IPv6 host:port, and a
// wildcard host unless listenAny.
func checkListen(flag, addr string, listenAny bool) error {
	if flag == "icmp" {
		// The ICMP observer listens on an address, not a port.
		a, err := netip.ParseAddr(addr)
		if err != nil || !a.Is4() {
			return fmt.Errorf("--icmp %q: want an IPv4 address, such as 127.0.0.1", addr)
		}
		if a.IsUnspecified() && !listenAny {
			return fmt.Errorf("--icmp %s listens on every address of the host; name one, or pass --listen-any", addr)
		}
		return nil
	}
	ap, err := netip.ParseAddrPort(addr)
	if err != nil || ap.Addr().Zone() != "" || ap.Addr().Is4In6() {
		return fmt.Errorf("--%s %q: want an IPv4 or [IPv6] address and port, such as 127.0.0.1:8080 or [::1]:8080", flag, addr)
	}
	if ap.Addr().IsUnspecified() && !listenAny {
		return fmt.Errorf("--%s %s listens on every address of the host; name one, or pass --listen-any", flag, addr)
	}
	return nil
}

// hitWriter appends hits to a file as JSON lines.
type hitWriter struct {
	mu  sync.Mutex
	enc *json.Encoder
	err error
}

func (w *hitWriter) write(h canary.Hit) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.err == nil {
		w.err = w.enc.Encode(h)
	}
}

// serveCanaries starts the listeners o names, prints where they are, and
// serves until ctx ends.
func serveCanaries(ctx context.Context, o canaryOptions, out io.Writer, log *slog.Logger) (err error) {
	type named struct{ svc, addr string }
	var all []named
	for _, svc := range canary.Services {
		for _, a := range *o.addrs[svc.Name] {
			if a != "" {
				all = append(all, named{svc.Name, a})
			}
		}
	}
	if len(all) == 0 {
		return errors.New("serving canaries: every listener is turned off")
	}
	on := func(name string) bool { return slices.ContainsFunc(all, func(n named) bool { return n.svc == name }) }
	if !on("dns") && (on("dot") || on("doh")) {
		return errors.New("serving canaries: --dot and --doh serve the DNS canary, which --dns \"\" turned off")
	}
	var owned []netip.Addr
	for _, n := range all {
		if err := checkListen(n.svc, n.addr, o.listenAny); err != nil {
			return err
		}
		owned = append(owned, listenAddr(n.addr))
	}
	var kubeIP netip.Addr
	if addrs := *o.addrs["kube-api"]; len(addrs) > 0 && addrs[0] != "" {
		kubeIP = listenAddr(addrs[0])
	}
	outside := o.outside
	if sinks := *o.addrs["sink"]; outside == "" && len(sinks) > 0 {
		outside, _, _ = net.SplitHostPort(sinks[0])
	}
	var outsideIP netip.Addr
	if outside != "" {
		if outsideIP, err = netip.ParseAddr(outside); err != nil || !outsideIP.Is4() {
			return fmt.Errorf("--outside %q: want an IPv4 address", outside)
		}
	}

	f, err := os.OpenFile(o.hits, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("opening hits file: %w", err)
	}
	w := &hitWriter{enc: json.NewEncoder(f)}
	rec := canary.NewRecorder(o.maxHits, w.write)

	var closers []canary.Running
	defer func() {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), canaryCloseTimeout)
		defer cancel()
		for _, c := range closers {
			if cerr := c.Close(cctx); cerr != nil {
				err = errors.Join(err, cerr)
			}
		}
		w.mu.Lock()
		err = errors.Join(err, w.err)
		w.mu.Unlock()
		if cerr := f.Close(); cerr != nil {
			err = errors.Join(err, fmt.Errorf("closing hits file: %w", cerr))
		}
		if d := rec.Dropped(); d > 0 {
			log.Warn("hits dropped past --max-hits", "dropped", d)
		}
	}()

	fmt.Fprintln(out, "# sandcheck canaries; hits are appended to", o.hits)
	kit, err := canaryKit(o, rec, log, out, owned, kubeIP, outsideIP)
	if err != nil {
		return err
	}
	for _, n := range all {
		svc, _ := canary.LookupService(n.svc)
		l, err := svc.Serve(ctx, kit, n.addr)
		if err != nil {
			return fmt.Errorf("--%s %s: %w", n.svc, n.addr, err)
		}
		closers = append(closers, l)
		fmt.Fprintf(out, "%s: %s\n", canaryPrintKey(n.svc), l.Addr())
		if n.svc == "dns" {
			fmt.Fprintf(out, "dns_zone: %s\n", kit.DNS.Zone())
		}
	}
	if outsideIP.IsValid() {
		fmt.Fprintf(out, "outside_addr: %s\n", outsideIP)
	}
	<-ctx.Done()
	fmt.Fprintf(out, "# stopped: %d hits written\n", len(rec.Hits()))
	return nil
}

// canaryKit makes the handlers of canary serve's services, printing the
// tokens a sandbox needs (the Kubernetes token canary serve made, the
// broker's token).
func canaryKit(o canaryOptions, rec *canary.Recorder, log *slog.Logger, out io.Writer, owned []netip.Addr, kubeIP, outsideIP netip.Addr) (*canary.Kit, error) {
	kube := canary.NewKubeAPI(canary.KubeAPIOptions{Recorder: rec, Logger: log})
	toks := o.kubeToken
	if len(toks) == 0 && kubeIP.IsValid() {
		tok, err := newKubeToken()
		if err != nil {
			return nil, err
		}
		toks = []string{tok}
		fmt.Fprintf(out, "kube_token: %s\n", tok)
	}
	for _, t := range toks {
		if !kube.AcceptToken(t) {
			return nil, fmt.Errorf("--kube-token: empty, repeated, or more than %d tokens", canary.MaxKubeTokens)
		}
	}
	var kube4 netip.Addr
	if kubeIP.Is4() {
		kube4 = kubeIP
	}
	var broker *canary.Broker
	if addrs := *o.addrs["broker"]; len(addrs) > 0 {
		tok, err := newKubeToken()
		if err != nil {
			return nil, err
		}
		tok = "scb" + strings.TrimPrefix(tok, "sandcheck-sa-")
		// The reference token broker (hardened) serves beside the query
		// path; its mint endpoint takes the printed broker token as admin key.
		ref, err := canary.NewTokenBroker(canary.TokenBrokerOptions{Mode: canary.BrokerHardened, AdminKey: tok})
		if err != nil {
			return nil, err
		}
		broker = canary.NewBroker(rec, tok, false).WithReference(ref)
		fmt.Fprintf(out, "broker_token: %s\n", tok)
	}
	var mirror netip.Addr
	if addrs := *o.addrs["mirror"]; len(addrs) > 0 && addrs[0] != "" {
		mirror = listenAddr(addrs[0])
	}
	return &canary.Kit{
		Logger:      log,
		Metadata:    canary.NewMetadata(canary.MetadataOptions{Recorder: rec, Logger: log}),
		KubeAPI:     kube,
		DNS:         canary.NewDNS(canary.DNSOptions{Recorder: rec, Logger: log, Zone: o.zone, Outside: outsideIP, KubeAPI: kube4, Mirror: mirror}),
		Outside:     canary.NewSink(canary.SinkOptions{Recorder: rec, Logger: log, Role: "outside"}),
		Mirror:      canary.NewSink(canary.SinkOptions{Recorder: rec, Logger: log, Role: "package-mirror"}),
		HostService: canary.NewSink(canary.SinkOptions{Recorder: rec, Logger: log, Role: "host-service"}),
		// The proxy tunnels only to the addresses canary serve listens on.
		Proxy:  canary.NewProxy(canary.ProxyOptions{Recorder: rec, Logger: log, Owned: func(a netip.Addr) bool { return slices.Contains(owned, a) }}),
		Broker: broker,
	}, nil
}

// listenAddr is the address of a listener's host:port (or bare address),
// checked by checkListen.
func listenAddr(addr string) netip.Addr {
	if ap, err := netip.ParseAddrPort(addr); err == nil {
		return ap.Addr()
	}
	a, _ := netip.ParseAddr(addr)
	return a
}

// newKubeToken makes a service-account token for the Kubernetes API canary
// when none is given: random, shaped like a bearer token.
func newKubeToken() (string, error) {
	b := make([]byte, 24)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("making a Kubernetes token: %w", err)
	}
	return "sandcheck-sa-" + hex.EncodeToString(b), nil
}
