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
	"net/http"
	"net/netip"
	"os"
	"os/signal"
	"slices"
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
	metadata  []string
	ecs       string
	alibaba   string
	kubeAPI   string
	kubeToken []string
	dns       string
	dot       string
	doh       string
	sinks     []string
	udpSinks  []string
	outside   string
	zone      string
	hits      string
	duration  time.Duration
	listenAny bool
	maxHits   int
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
		Long: `Serve runs the canaries sandcheck runs for itself (the fake cloud metadata
services: AWS, GCP and Azure, ECS task-role credentials, Alibaba Cloud; a
fake Kubernetes API server over TLS; the DNS canary authoritative for the
harness zone, also over TLS and HTTPS; TCP and UDP sinks) on the IPv4 or
IPv6 addresses you name, for sandboxes sandcheck does not start itself:
point the sandbox at them, run the probes, and read the hits.

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
	f.StringSliceVar(&o.metadata, "metadata", []string{"127.0.0.1:8169"}, "HOST:PORT of the metadata canary (AWS, GCP, Azure); repeatable (an IPv4 and an [IPv6] address); empty for none")
	f.StringVar(&o.ecs, "ecs", "", "HOST:PORT of the ECS task-role credentials canary; empty for none")
	f.StringVar(&o.alibaba, "alibaba", "", "HOST:PORT of the Alibaba Cloud metadata canary; empty for none")
	f.StringVar(&o.kubeAPI, "kube-api", "", "HOST:PORT of the Kubernetes API canary (HTTPS); the DNS canary resolves kubernetes.default.svc to an IPv4 one; empty for none")
	f.StringSliceVar(&o.kubeToken, "kube-token", nil, "service-account token the Kubernetes API canary accepts; repeatable (default: one made and printed)")
	f.StringVar(&o.dns, "dns", "127.0.0.1:8053", "HOST:PORT of the DNS canary (UDP and TCP); empty for none")
	f.StringVar(&o.dot, "dot", "", "HOST:PORT of the DNS canary over TLS (needs --dns); empty for none")
	f.StringVar(&o.doh, "doh", "", "HOST:PORT of the DNS canary over HTTPS, at "+canary.DoHPath+" (needs --dns); empty for none")
	f.StringSliceVar(&o.sinks, "sink", []string{"127.0.0.1:8080"}, "HOST:PORT of a TCP sink (also answers HTTP); repeatable")
	f.StringSliceVar(&o.udpSinks, "udp-sink", []string{"127.0.0.1:8123"}, "HOST:PORT of a UDP sink; repeatable")
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
	type named struct{ flag, addr string }
	var all []named
	o.metadata = slices.DeleteFunc(o.metadata, func(a string) bool { return a == "" })
	for _, m := range o.metadata {
		all = append(all, named{"metadata", m})
	}
	for _, n := range []named{{"ecs", o.ecs}, {"alibaba", o.alibaba}, {"kube-api", o.kubeAPI}, {"dns", o.dns}, {"dot", o.dot}, {"doh", o.doh}} {
		if n.addr != "" {
			all = append(all, n)
		}
	}
	if o.dns == "" && (o.dot != "" || o.doh != "") {
		return errors.New("serving canaries: --dot and --doh serve the DNS canary, which --dns \"\" turned off")
	}
	for _, s := range o.sinks {
		all = append(all, named{"sink", s})
	}
	for _, s := range o.udpSinks {
		all = append(all, named{"udp-sink", s})
	}
	if len(all) == 0 {
		return errors.New("serving canaries: every listener is turned off")
	}
	for _, n := range all {
		if err := checkListen(n.flag, n.addr, o.listenAny); err != nil {
			return err
		}
	}
	var kubeIP netip.Addr
	if o.kubeAPI != "" {
		kubeIP = netip.MustParseAddrPort(o.kubeAPI).Addr() // checked above
	}
	outside := o.outside
	if outside == "" && len(o.sinks) > 0 {
		outside, _, _ = net.SplitHostPort(o.sinks[0])
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

	var closers []interface{ Close(context.Context) error }
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
	meta := canary.NewMetadata(canary.MetadataOptions{Recorder: rec, Logger: log})
	for _, srv := range []struct {
		flag, addr string
		h          http.Handler
	}{{"metadata", "", meta}, {"ecs", o.ecs, meta.ECS()}, {"alibaba", o.alibaba, meta.Alibaba()}} {
		addrs := []string{srv.addr}
		if srv.flag == "metadata" {
			addrs = o.metadata
		}
		for _, a := range addrs {
			if a == "" {
				continue
			}
			s, err := canary.Serve(ctx, a, srv.h, log)
			if err != nil {
				return err
			}
			closers = append(closers, s)
			fmt.Fprintf(out, "%s_addr: %s\n", srv.flag, s.Addr())
		}
	}
	if o.kubeAPI != "" {
		kube := canary.NewKubeAPI(canary.KubeAPIOptions{Recorder: rec, Logger: log})
		toks := o.kubeToken
		if len(toks) == 0 {
			tok, err := newKubeToken()
			if err != nil {
				return err
			}
			toks = []string{tok}
			fmt.Fprintf(out, "kube_token: %s\n", tok)
		}
		for _, t := range toks {
			if !kube.AcceptToken(t) {
				return fmt.Errorf("--kube-token: empty, repeated, or more than %d tokens", canary.MaxKubeTokens)
			}
		}
		cfg, err := canary.SelfSignedTLSNames([]netip.Addr{kubeIP}, canary.KubeAPIHostnames)
		if err != nil {
			return err
		}
		s, err := canary.ServeTLS(ctx, o.kubeAPI, kube, cfg, log)
		if err != nil {
			return err
		}
		closers = append(closers, s)
		fmt.Fprintf(out, "kube_api_addr: %s\n", s.Addr())
	}
	if o.dns != "" {
		var kube4 netip.Addr
		if kubeIP.Is4() {
			kube4 = kubeIP
		}
		d := canary.NewDNS(canary.DNSOptions{Recorder: rec, Logger: log, Zone: o.zone, Outside: outsideIP, KubeAPI: kube4})
		s, err := canary.ServeDNS(ctx, o.dns, d, log)
		if err != nil {
			return err
		}
		closers = append(closers, s)
		fmt.Fprintf(out, "dns_addr: %s\ndns_zone: %s\n", s.Addr(), d.Zone())
		for _, enc := range []struct{ flag, addr string }{{"dot", o.dot}, {"doh", o.doh}} {
			if enc.addr == "" {
				continue
			}
			cfg, err := canary.SelfSignedTLS([]netip.Addr{netip.MustParseAddrPort(enc.addr).Addr()})
			if err != nil {
				return err
			}
			if enc.flag == "dot" {
				c, err := canary.ServeDoT(ctx, enc.addr, d, cfg, log)
				if err != nil {
					return err
				}
				closers = append(closers, c)
				fmt.Fprintf(out, "dot_addr: %s\n", c.Addr())
				continue
			}
			c, err := canary.ServeTLS(ctx, enc.addr, d.DoH(), cfg, log)
			if err != nil {
				return err
			}
			closers = append(closers, c)
			fmt.Fprintf(out, "doh_addr: %s\n", c.Addr())
		}
	}
	sink := canary.NewSink(canary.SinkOptions{Recorder: rec, Logger: log, Role: "outside"})
	for _, a := range o.sinks {
		l, err := sink.ServeTCP(ctx, a)
		if err != nil {
			return err
		}
		closers = append(closers, l)
		fmt.Fprintf(out, "sink_tcp: %s\n", l.Addr())
	}
	for _, a := range o.udpSinks {
		l, err := sink.ServeUDP(ctx, a)
		if err != nil {
			return err
		}
		closers = append(closers, l)
		fmt.Fprintf(out, "sink_udp: %s\n", l.Addr())
	}
	if outsideIP.IsValid() {
		fmt.Fprintf(out, "outside_addr: %s\n", outsideIP)
	}
	<-ctx.Done()
	fmt.Fprintf(out, "# stopped: %d hits written\n", len(rec.Hits()))
	return nil
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
