// Command sandcheck-cni is a minimal CNI plugin (spec 1.0.0) for the
// sandcheck cluster, installed as "bridge" and "loopback" in the cluster's
// own CNI folder when Debian's containernetworking-plugins are not there.
// As "loopback" it brings lo up in the pod's namespace. As "bridge" it
// attaches the pod to the configured bridge through a veth pair, gives it
// the next free address of the subnet (files in ipam.dataDir, under a
// lock) and only the routes the configuration lists: no default route, no
// masquerade, no sysctl changed.
package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
)

type conf struct {
	CNIVersion string `json:"cniVersion"`
	Name       string `json:"name"`
	Type       string `json:"type"`
	Bridge     string `json:"bridge"`
	IPAM       struct {
		DataDir string `json:"dataDir"`
		Ranges  [][]struct {
			Subnet  string `json:"subnet"`
			Gateway string `json:"gateway"`
		} `json:"ranges"`
		Routes []struct {
			Dst string `json:"dst"`
		} `json:"routes"`
	} `json:"ipam"`
}

func main() {
	if err := run(); err != nil {
		json.NewEncoder(os.Stdout).Encode(map[string]any{"cniVersion": "1.0.0", "code": 100, "msg": err.Error()})
		os.Exit(1)
	}
}

func run() error {
	cmd := os.Getenv("CNI_COMMAND")
	if cmd == "VERSION" {
		return json.NewEncoder(os.Stdout).Encode(map[string]any{"cniVersion": "1.0.0", "supportedVersions": []string{"0.3.1", "0.4.0", "1.0.0"}})
	}
	b, err := io.ReadAll(io.LimitReader(os.Stdin, 1<<20))
	if err != nil {
		return fmt.Errorf("reading the network configuration: %w", err)
	}
	var c conf
	if err := json.Unmarshal(b, &c); err != nil {
		return fmt.Errorf("parsing the network configuration: %w", err)
	}
	if c.CNIVersion == "" {
		c.CNIVersion = "1.0.0"
	}
	id, nsPath, ifname := os.Getenv("CNI_CONTAINERID"), os.Getenv("CNI_NETNS"), os.Getenv("CNI_IFNAME")
	switch cmd {
	case "ADD":
		if c.Type == "loopback" {
			return loopback(c, nsPath, ifname)
		}
		return add(c, id, nsPath, ifname)
	case "DEL":
		if c.Type != "loopback" {
			return del(c, id)
		}
		return nil
	case "CHECK", "GC", "STATUS":
		return nil
	}
	return fmt.Errorf("unknown CNI_COMMAND %q", cmd)
}

func loopback(c conf, nsPath, ifname string) error {
	h, closeNS, err := handleIn(nsPath)
	if err != nil {
		return err
	}
	defer closeNS()
	lo, err := h.LinkByName("lo")
	if err != nil {
		return fmt.Errorf("finding lo: %w", err)
	}
	if err := h.LinkSetUp(lo); err != nil {
		return fmt.Errorf("setting lo up: %w", err)
	}
	return json.NewEncoder(os.Stdout).Encode(map[string]any{"cniVersion": c.CNIVersion,
		"interfaces": []any{map[string]string{"name": ifname, "sandbox": nsPath}},
		"ips":        []any{map[string]any{"address": "127.0.0.1/8", "interface": 0}}})
}

func handleIn(nsPath string) (*netlink.Handle, func(), error) {
	ns, err := netns.GetFromPath(nsPath)
	if err != nil {
		return nil, nil, fmt.Errorf("opening network namespace %s: %w", nsPath, err)
	}
	h, err := netlink.NewHandleAt(ns)
	if err != nil {
		ns.Close()
		return nil, nil, fmt.Errorf("netlink in %s: %w", nsPath, err)
	}
	return h, func() { h.Close(); ns.Close() }, nil
}

func add(c conf, id, nsPath, ifname string) error {
	if len(c.IPAM.Ranges) != 1 || len(c.IPAM.Ranges[0]) != 1 || c.IPAM.DataDir == "" {
		return errors.New("ipam: want one range with one subnet and a dataDir")
	}
	rg := c.IPAM.Ranges[0][0]
	gw := net.ParseIP(rg.Gateway).To4()
	_, subnet, err := net.ParseCIDR(rg.Subnet)
	if err != nil || gw == nil {
		return fmt.Errorf("ipam: subnet %q gateway %q: %v", rg.Subnet, rg.Gateway, err)
	}
	ones, _ := subnet.Mask.Size()
	br, err := ensureBridge(c.Bridge, &net.IPNet{IP: gw, Mask: subnet.Mask})
	if err != nil {
		return err
	}
	ip, err := allocate(c.IPAM.DataDir, subnet, gw, id)
	if err != nil {
		return err
	}
	host := "scv" + id[:min(len(id), 11)]
	peer := "scp" + id[:min(len(id), 11)]
	veth := &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: host, MasterIndex: br.Attrs().Index}, PeerName: peer}
	if err := netlink.LinkAdd(veth); err != nil {
		return fmt.Errorf("creating veth %s: %w", host, err)
	}
	ns, err := netns.GetFromPath(nsPath)
	if err != nil {
		return fmt.Errorf("opening network namespace %s: %w", nsPath, err)
	}
	defer ns.Close()
	pl, err := netlink.LinkByName(peer)
	if err != nil {
		return fmt.Errorf("finding %s: %w", peer, err)
	}
	if err := netlink.LinkSetNsFd(pl, int(ns)); err != nil {
		return fmt.Errorf("moving %s into %s: %w", peer, nsPath, err)
	}
	hl, err := netlink.LinkByName(host)
	if err != nil {
		return fmt.Errorf("finding %s: %w", host, err)
	}
	if err := netlink.LinkSetUp(hl); err != nil {
		return fmt.Errorf("setting %s up: %w", host, err)
	}
	h, closeNS, err := handleIn(nsPath)
	if err != nil {
		return err
	}
	defer closeNS()
	in, err := h.LinkByName(peer)
	if err != nil {
		return fmt.Errorf("finding %s in the pod: %w", peer, err)
	}
	if err := h.LinkSetName(in, ifname); err != nil {
		return fmt.Errorf("renaming %s to %s: %w", peer, ifname, err)
	}
	addr := &net.IPNet{IP: ip, Mask: subnet.Mask}
	if err := h.AddrAdd(in, &netlink.Addr{IPNet: addr}); err != nil {
		return fmt.Errorf("addressing %s: %w", ifname, err)
	}
	if err := h.LinkSetUp(in); err != nil {
		return fmt.Errorf("setting %s up: %w", ifname, err)
	}
	var routes []any
	for _, r := range c.IPAM.Routes {
		_, dst, err := net.ParseCIDR(r.Dst)
		if err != nil {
			return fmt.Errorf("route %q: %w", r.Dst, err)
		}
		if err := h.RouteAdd(&netlink.Route{LinkIndex: in.Attrs().Index, Dst: dst, Gw: gw}); err != nil {
			return fmt.Errorf("route %s via %s: %w", dst, gw, err)
		}
		routes = append(routes, map[string]string{"dst": dst.String(), "gw": gw.String()})
	}
	mac := in.Attrs().HardwareAddr.String()
	return json.NewEncoder(os.Stdout).Encode(map[string]any{"cniVersion": c.CNIVersion,
		"interfaces": []any{map[string]string{"name": ifname, "sandbox": nsPath, "mac": mac}},
		"ips":        []any{map[string]any{"address": fmt.Sprintf("%s/%d", ip, ones), "gateway": gw.String(), "interface": 0}},
		"routes":     routes})
}

func ensureBridge(name string, gw *net.IPNet) (netlink.Link, error) {
	br, err := netlink.LinkByName(name)
	if err != nil {
		if err := netlink.LinkAdd(&netlink.Bridge{LinkAttrs: netlink.LinkAttrs{Name: name}}); err != nil && !errors.Is(err, syscall.EEXIST) {
			return nil, fmt.Errorf("creating bridge %s: %w", name, err)
		}
		if br, err = netlink.LinkByName(name); err != nil {
			return nil, fmt.Errorf("finding bridge %s: %w", name, err)
		}
	}
	if err := netlink.AddrAdd(br, &netlink.Addr{IPNet: gw}); err != nil && !errors.Is(err, syscall.EEXIST) {
		return nil, fmt.Errorf("addressing bridge %s: %w", name, err)
	}
	if err := netlink.LinkSetUp(br); err != nil {
		return nil, fmt.Errorf("setting bridge %s up: %w", name, err)
	}
	return br, nil
}

// allocate takes the next free address of the subnet for id, recorded as a
// file named after it, under an flock of the folder.
func allocate(dir string, subnet *net.IPNet, gw net.IP, id string) (net.IP, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("ipam folder: %w", err)
	}
	lock, err := os.OpenFile(filepath.Join(dir, "lock"), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, fmt.Errorf("ipam lock: %w", err)
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		return nil, fmt.Errorf("ipam lock: %w", err)
	}
	base := subnet.IP.To4()
	for i := 2; i < 255; i++ {
		ip := net.IPv4(base[0], base[1], base[2], byte(i)).To4()
		if ip.Equal(gw) || !subnet.Contains(ip) {
			continue
		}
		f, err := os.OpenFile(filepath.Join(dir, ip.String()), os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
		if errors.Is(err, os.ErrExist) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("ipam: %w", err)
		}
		_, err = f.WriteString(id)
		f.Close()
		return ip, err
	}
	return nil, fmt.Errorf("ipam: no free address in %s", subnet)
}

func del(c conf, id string) error {
	if l, err := netlink.LinkByName("scv" + id[:min(len(id), 11)]); err == nil {
		_ = netlink.LinkDel(l)
	}
	dir := c.IPAM.DataDir
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if b, err := os.ReadFile(filepath.Join(dir, e.Name())); err == nil && strings.TrimSpace(string(b)) == id && e.Name() != "lock" {
			os.Remove(filepath.Join(dir, e.Name()))
		}
	}
	return nil
}
