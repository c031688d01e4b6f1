// Package netharness builds the per-run harness network: a Docker bridge
// network on a link-local subnet whose bridge also holds 169.254.169.254,
// where a canary.Metadata listens (and 169.254.170.2 and 100.100.100.200,
// the ECS task-role and Alibaba Cloud metadata canaries), and documentation addresses that
// stand for "outside" (TCP and UDP sinks, a second resolver). The gateway
// runs the DNS canary that is every sandbox's resolver. Sandboxes attached
// to it can reach the harness's own addresses on the host and nothing
// else: forwarded traffic
// into or out of the bridge is dropped in DOCKER-USER, traffic to other host
// addresses is dropped in INPUT. IPv6 is off on the bridge until the
// harness has fenced it with ip6tables; then the harness itself (never
// Docker) gives the bridge and each sandbox IPv6 addresses of its own
// (ipv6.go), unless the host forwards IPv6.
//
// Creating and removing the network needs root (netlink, iptables) and a
// Docker engine with its iptables integration on (the DOCKER-USER chain).
// One harness network exists per host at a time; see DefaultLockPath.
package netharness

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/coreos/go-iptables/iptables"
	"github.com/moby/moby/api/types/network"
	"github.com/moby/moby/client"

	"github.com/sandcheck/sandcheck/canary"
)

// Labels on every harness network.
const (
	LabelHarness = "sandcheck.harness"
	LabelRun     = "sandcheck.run"
)

// Docker bridge driver options the harness sets.
const (
	optBridgeName = "com.docker.network.bridge.name"
	optMasquerade = "com.docker.network.bridge.enable_ip_masquerade"
)

// rollbackTimeout bounds the undo of a failed Create, which runs even when
// the caller's context has ended.
const rollbackTimeout = 30 * time.Second

// Backend is implemented by runners whose sandboxes join the harness
// network as a network of their own engine (the docker runner): the harness
// asks the runner for the engine client rather than dialling one itself.
type Backend interface {
	// NetworkAPI is the engine client the network is created with.
	NetworkAPI(ctx context.Context) (client.NetworkAPIClient, error)
}

// Joiner is implemented by runners that attach their sandboxes to the
// harness network themselves (a network namespace joined to the bridge,
// not a network of their own engine): once the run has created the
// network, the engine hands it over before any sandbox starts, and leaves
// the sandbox's addresses (IPv6 included) to the runner.
type Joiner interface {
	// JoinHarness gives the runner the run's harness network.
	JoinHarness(n *Network)
}

// Options configures Create.
type Options struct {
	// RunID names the run; required. The network is labelled with it and
	// named after its first characters.
	RunID string
	// Logger receives progress and teardown details; nil discards.
	Logger *slog.Logger
	// Docker is the engine client (a *client.Client satisfies it); required.
	Docker client.NetworkAPIClient
	// OnHit, if set, is called with every canary hit kept (see
	// canary.NewRecorder), so the run can stream hits into its evidence.
	OnHit func(canary.Hit)
	// MaxHits caps the hits kept (canary.DefaultMaxHits when 0).
	MaxHits int
	// LockPath overrides DefaultLockPath.
	LockPath string
	// Egress is the egress profile the network enforces in its INPUT rules
	// (see inputRules): "" or open, mirror-only or none.
	Egress string
	// KubeTokens are the service-account tokens the run planted, which the
	// Kubernetes API canary accepts as bearer tokens (at most
	// canary.MaxKubeTokens).
	KubeTokens []string
}

// Network is one run's harness network. Its methods are safe for concurrent
// use; its accessors keep answering after Close, for teardown checks.
type Network struct {
	log    *slog.Logger
	docker client.NetworkAPIClient
	ipt    *iptables.IPTables
	lock   *hostLock

	id, name, bridge string
	plan             plan
	egress           string

	rules    []rule // inserted, in order
	addrDone bool
	meta     *canary.Metadata
	dns      *canary.DNS
	canaries []closer // DNS servers and sinks, in start order
	// neighbour is the neighbour sandbox's stand-in (neighbour.go); stopped
	// with the canaries.
	neighbour     *neighbour
	neighbourLink string         // its veth end, remembered for Leftovers
	brokerToken   string         // the tool broker's per-run token
	toolBroker    *canary.Broker // the tool broker the canaries serve
	kube          *canary.KubeAPI
	kubeTokens    []string
	// IPv6 (ipv6.go): the ip6tables fence, whether the bridge's IPv6
	// addresses may need undoing, and whether sandboxes get IPv6.
	ipt6      *iptables.IPTables
	rules6    []rule
	addr6Done bool
	v6        bool

	closeMu sync.Mutex
	closed  bool
}

var runIDChars = regexp.MustCompile(`[^a-z0-9_.-]+`)

// Create builds the harness network for one run. It first waits for the
// host's harness lock (until ctx ends), then removes anything a dead run
// left behind, then creates the Docker network, fences it with iptables,
// puts 169.254.169.254 and the outside addresses on its bridge and starts
// the metadata canary, the DNS canary and the sinks there.
// On failure it undoes what it did. The caller must Close the Network.
func Create(ctx context.Context, opts Options) (n *Network, err error) {
	if opts.RunID == "" {
		return nil, errors.New("creating harness network: empty run ID")
	}
	if opts.Docker == nil {
		return nil, errors.New("creating harness network: no docker client")
	}
	if _, err := inputRules("check", "169.254.0.1", opts.Egress); err != nil {
		return nil, fmt.Errorf("creating harness network: %w", err)
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.LockPath == "" {
		opts.LockPath = DefaultLockPath
	}
	ipt, err := iptables.New()
	if err != nil {
		return nil, fmt.Errorf("finding iptables: %w", err)
	}
	lock, err := acquireLockNotify(ctx, opts.LockPath, func(holder string) {
		opts.Logger.Warn("waiting for the harness lock: another run holds it (one harness network per host)", "lock", opts.LockPath, "holder", holder)
	})
	if err != nil {
		return nil, err
	}
	n = &Network{log: opts.Logger, docker: opts.Docker, ipt: ipt, lock: lock}
	defer func() {
		if err != nil {
			rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), rollbackTimeout)
			defer cancel()
			if cerr := n.Close(rctx); cerr != nil {
				err = errors.Join(err, fmt.Errorf("undoing failed create: %w", cerr))
			}
			n = nil
		}
	}()

	swept, err := sweepLocked(ctx, opts.Docker, ipt)
	for _, s := range swept {
		n.log.Warn("removed leftover of a dead run", "what", s)
	}
	if err != nil {
		return n, err
	}
	if err := n.build(ctx, opts); err != nil {
		return n, err
	}
	n.log.Info("harness network up", "network", n.name, "bridge", n.bridge,
		"subnet", n.plan.Subnet, "metadata", n.MetadataAddr())
	return n, nil
}

// build does the creating; Create's deferred Close undoes it on error.
func (n *Network) build(ctx context.Context, opts Options) error {
	used, err := usedPrefixes(ctx, opts.Docker)
	if err != nil {
		return err
	}
	if err := checkOutsideFree(used); err != nil {
		return err
	}
	n.plan, err = pickSubnet(used, randomStart())
	if err != nil {
		return err
	}
	if n.bridge, err = freeBridgeName(); err != nil {
		return err
	}
	n.name = "sandcheck-" + shortID(opts.RunID)
	res, err := opts.Docker.NetworkCreate(ctx, n.name, client.NetworkCreateOptions{
		Driver: "bridge",
		IPAM: &network.IPAM{
			Driver: "default",
			Config: []network.IPAMConfig{{Subnet: n.plan.Subnet, IPRange: n.plan.IPRange, Gateway: n.plan.Gateway}},
		},
		Options: map[string]string{optBridgeName: n.bridge, optMasquerade: "false"},
		Labels:  map[string]string{LabelHarness: "1", LabelRun: opts.RunID},
	})
	if err != nil {
		return fmt.Errorf("creating docker network %s: %w", n.name, err)
	}
	n.id = res.ID
	for _, w := range res.Warning {
		n.log.Warn("docker warned creating network", "network", n.name, "warning", w)
	}
	if ok, err := linkExists(n.bridge); err != nil || !ok {
		return errors.Join(fmt.Errorf("docker created no bridge %s", n.bridge), err)
	}
	if err := disableIPv6(n.bridge); err != nil {
		return err
	}
	if err := strictReversePath(n.bridge); err != nil {
		return err
	}
	if err := checkForwardOrder(n.ipt, n.bridge); err != nil {
		return err
	}
	// Fence first, so nothing on the bridge is reachable unfenced.
	in, err := inputRules(n.bridge, n.plan.Gateway.String(), opts.Egress)
	if err != nil {
		return err
	}
	n.egress = opts.Egress
	n.kubeTokens = opts.KubeTokens
	n.rules, err = insertRules(n.ipt, append(forwardRules(n.bridge, opts.Egress), in...))
	if err != nil {
		return err
	}
	n.addrDone = true // set first: a partial add is undone too
	if err := addHostAddrs(n.bridge, hostAddrs()); err != nil {
		return err
	}
	if err := n.setupIPv6(opts.Egress); err != nil {
		return err
	}
	rec := canary.NewRecorder(opts.MaxHits, opts.OnHit)
	n.meta = canary.NewMetadata(canary.MetadataOptions{Recorder: rec, Logger: n.log})
	return n.startCanaries(ctx, rec, n.log)
}

// freeBridgeName draws scbr-<8 hex> names until one is not taken.
func freeBridgeName() (string, error) {
	for range 8 {
		b := make([]byte, 4)
		rand.Read(b)
		name := "scbr-" + hex.EncodeToString(b)
		taken, err := linkExists(name)
		if err != nil {
			return "", err
		}
		if !taken {
			return name, nil
		}
	}
	return "", errors.New("choosing a bridge name: every name drawn was taken")
}

// shortID makes a Docker-safe fragment of a run ID.
func shortID(runID string) string {
	s := strings.Trim(runIDChars.ReplaceAllString(strings.ToLower(runID), "-"), "-._")
	if len(s) > 12 {
		s = s[:12]
	}
	if s == "" {
		s = "run"
	}
	return s
}

// Name is the Docker network's name; attach sandboxes by it.
func (n *Network) Name() string { return n.name }

// ID is the Docker network's ID.
func (n *Network) ID() string { return n.id }

// Bridge is the Linux bridge's name (scbr-<8 hex>).
func (n *Network) Bridge() string { return n.bridge }

// Subnet is the network's 169.254.N.0/24; containers get addresses from its
// lower half only.
func (n *Network) Subnet() netip.Prefix { return n.plan.Subnet }

// Gateway is the bridge's own address, 169.254.N.1.
func (n *Network) Gateway() netip.Addr { return n.plan.Gateway }

// MetadataAddr is where the metadata canary listens, "169.254.169.254:80".
func (n *Network) MetadataAddr() string {
	return net.JoinHostPort(metadataIP.String(), "80")
}

// DNS is the resolver address sandboxes must be given (the gateway), where
// the DNS canary answers on port 53.
func (n *Network) DNS() string { return n.plan.Gateway.String() }

// Metadata is the metadata canary, holding the run's honeytokens.
func (n *Network) Metadata() *canary.Metadata { return n.meta }

// Recorder holds every canary hit of the run.
func (n *Network) Recorder() *canary.Recorder {
	if n.meta == nil {
		return nil
	}
	return n.meta.Recorder()
}
