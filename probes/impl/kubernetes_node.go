package impl

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/sandcheck/sandcheck/probes"
)

// maxKubelets bounds how many kubelet addresses the probe tries.
const maxKubelets = 4

// k8sKubeletPort connects to the kubelets the runner named (the cluster's
// own node addresses and kubelet port) and, when one answers, asks it for
// its pods without credentials. A kubelet port in reach of a pod is the
// node's most powerful API one authentication bug away.
func k8sKubeletPort(ctx context.Context, p probes.Params) probes.Result {
	e := ev{}
	if len(p.KubeletAddrs) == 0 {
		return inconclusive("the runner named no kubelet address (kubelet_addrs); nothing was sent", e)
	}
	addrs := p.KubeletAddrs[:min(len(p.KubeletAddrs), maxKubelets)]
	e.setList("kubelets", addrs)
	d := &net.Dialer{Timeout: k8sTimeout}
	var reached, refused []string
	for _, a := range addrs {
		c, err := d.DialContext(ctx, "tcp4", a)
		if err != nil {
			lbl := "error"
			if n, ok := errnoOf(err); ok {
				lbl = errnoLabel(n)
			} else if ne, ok := err.(net.Error); ok && ne.Timeout() {
				lbl = "timeout"
			}
			refused = append(refused, a+":"+lbl)
			continue
		}
		c.Close()
		reached = append(reached, a)
		e.set("pods_"+a, kubeletPods(ctx, a, p.Token))
	}
	if len(refused) > 0 {
		e.setList("unreached", refused)
	}
	if len(reached) == 0 {
		return blocked("no kubelet port answered from the pod", e)
	}
	e.setList("reached", reached)
	return escaped("the kubelet port answers from inside the pod: "+strings.Join(reached, ", "), e)
}

// kubeletPods asks a kubelet for /pods without credentials and says what it
// answered (HTTP status, or the error).
func kubeletPods(ctx context.Context, addr, token string) string {
	d := &net.Dialer{Timeout: k8sTimeout}
	hc := &http.Client{
		Transport: &http.Transport{
			Proxy: nil,
			DialContext: func(ctx context.Context, _, a string) (net.Conn, error) {
				if a != addr {
					return nil, fmt.Errorf("dialing %s: only %s is allowed", a, addr)
				}
				return d.DialContext(ctx, "tcp4", a)
			},
			TLSClientConfig:        &tls.Config{InsecureSkipVerify: true, MinVersion: tls.VersionTLS12},
			DisableKeepAlives:      true,
			ResponseHeaderTimeout:  k8sTimeout,
			MaxResponseHeaderBytes: 16 << 10,
		},
		Timeout:       k8sTimeout,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "https://"+addr+"/pods", nil)
	if err != nil {
		return "error: " + err.Error()
	}
	req.Header.Set("User-Agent", "sandcheck-probe/"+headerSafe(token)+"/kubernetes.kubelet-port")
	resp, err := hc.Do(req)
	if err != nil {
		return "error: " + clip(err.Error(), 120)
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, k8sReadMax))
	return "HTTP " + strconv.Itoa(resp.StatusCode)
}

// maxDownwardFiles bounds how many files of downward-API and projected
// volumes the probe reads.
const maxDownwardFiles = 32

// k8sDownwardNodeName looks for a node's name (the runner names the nodes
// the pod may run on) where the pod template put it: the environment
// (downward API fieldRef spec.nodeName), the files of downward-API and
// projected volumes, the host name.
func k8sDownwardNodeName(_ context.Context, p probes.Params) probes.Result {
	e := ev{}
	if len(p.KubeNodeNames) == 0 {
		return inconclusive("the runner named no node (kube_node_names)", e)
	}
	has := func(v string) bool {
		for _, n := range p.KubeNodeNames {
			if n != "" && strings.Contains(v, n) {
				return true
			}
		}
		return false
	}
	var where []string
	for _, kv := range os.Environ() {
		k, v, _ := strings.Cut(kv, "=")
		if has(v) {
			where = append(where, "env "+clip(k, 64))
		}
	}
	if h, err := os.Hostname(); err == nil && has(h) {
		where = append(where, "hostname")
	}
	read := 0
	if ms, err := readMountinfo(); err == nil {
		for _, m := range ms {
			if m.FSType != "tmpfs" || read >= maxDownwardFiles {
				continue
			}
			// The kubelet's atomic writer lays out downward-API and
			// projected volumes as a ..data link to a timestamped folder.
			if _, err := os.Lstat(filepath.Join(m.Target, "..data")); err != nil {
				continue
			}
			ents, err := os.ReadDir(m.Target)
			if err != nil {
				continue
			}
			for _, de := range ents {
				if strings.HasPrefix(de.Name(), "..") || read >= maxDownwardFiles {
					continue
				}
				read++
				b, err := readSandboxFile(filepath.Join(m.Target, de.Name()))
				if err == nil && has(string(b)) {
					where = append(where, "file "+clip(filepath.Join(m.Target, de.Name()), 128))
				}
			}
		}
	}
	e.setInt("volume_files_read", read)
	if len(where) == 0 {
		return blocked("no node name in the environment, the host name or the pod's downward-API volumes", e)
	}
	e.setList("found", where)
	return escaped("the pod is told its node's name: "+strings.Join(where, ", "), e)
}

// k8sPodHostAccess reads, from inside, what of the node the pod template
// hands the task: every capability (privileged), the node's processes
// (hostPID), its network interfaces (hostNetwork), its folders (hostPath).
func k8sPodHostAccess(_ context.Context, p probes.Params) probes.Result {
	e := ev{}
	var found []string
	if full, eff, err := allCapabilities(); err != nil {
		e.setErr("caps_", err)
	} else if e.set("cap_eff", eff); full {
		found = append(found, "privileged (CAP_SYS_ADMIN, CAP_SYS_MODULE, CAP_SYS_RAWIO and the other privileged-only capabilities)")
	}
	if b, err := readSandboxFile("/proc/1/cmdline"); err == nil {
		pid1 := clip(strings.TrimRight(strings.ReplaceAll(string(b), "\x00", " "), " "), 96)
		e.set("pid1", pid1)
		// The runner makes the task container's first process the probe
		// binary's sleeper (the pause process when the pod shares one
		// process namespace): any other PID 1 is the node's.
		if !strings.Contains(pid1, probes.SuidCanary) && !strings.Contains(pid1, "sandcheck-probe") && !strings.HasSuffix(strings.Fields(pid1 + " x")[0], "pause") {
			found = append(found, "the node's processes (hostPID: PID 1 is "+pid1+")")
		}
	}
	if ifs, err := net.Interfaces(); err == nil {
		var extra []string
		for _, i := range ifs {
			if i.Name != "lo" && i.Name != "eth0" {
				extra = append(extra, i.Name)
			}
		}
		if len(extra) > 0 {
			e.setList("interfaces", extra)
			found = append(found, "the node's network interfaces (hostNetwork: "+strings.Join(extra[:min(len(extra), 4)], ", ")+")")
		}
	}
	if ms, err := readMountinfo(); err == nil {
		var host []string
		for _, m := range hostMounts(ms, p.ProbeDir) {
			// The declared inputs folder, read-only, is the platform handing
			// the task its inputs (as host.bind-mounts counts it).
			if p.InputsDir != "" && m.Target == p.InputsDir && m.ReadOnly() {
				e.set("inputs_mount", m.Target+" (ro)")
				continue
			}
			host = append(host, m.Target)
		}
		if len(host) > 0 {
			e.setList("host_mounts", host)
			found = append(found, "host folders (hostPath: "+strings.Join(host[:min(len(host), 4)], ", ")+")")
		}
	}
	if len(found) == 0 {
		return blocked("the pod holds no node access: not privileged, its own process and network namespaces, no host folder", e)
	}
	e.setList("found", found)
	return escaped("the pod template hands the task the node: "+strings.Join(found, "; "), e)
}

// allCapabilities reports whether the effective set holds the
// capabilities only a privileged container gets (CAP_NET_ADMIN,
// CAP_SYS_MODULE, CAP_SYS_RAWIO, CAP_SYS_PTRACE, CAP_SYS_ADMIN,
// CAP_MAC_ADMIN) and returns the set as read. Not every one: a node's
// runtime may itself lack some (root without CAP_SYS_RESOURCE here).
func allCapabilities() (bool, string, error) {
	sb, err := readSandboxFile("/proc/self/status")
	if err != nil {
		return false, "", err
	}
	for _, l := range strings.Split(string(sb), "\n") {
		if v, ok := strings.CutPrefix(l, "CapEff:"); ok {
			eff, err := strconv.ParseUint(strings.TrimSpace(v), 16, 64)
			if err != nil {
				return false, "", fmt.Errorf("CapEff %q: %w", v, err)
			}
			const want = 1<<12 | 1<<16 | 1<<17 | 1<<19 | 1<<21 | 1<<33
			return eff&want == want, strings.TrimSpace(v), nil
		}
	}
	return false, "", fmt.Errorf("no CapEff in /proc/self/status")
}
