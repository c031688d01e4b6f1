#!/usr/bin/env bash
# Start the sandcheck single-node Kubernetes cluster from the binaries
# build.sh made: containerd (its own config, root, state and socket), etcd,
# kube-apiserver, then kube-controller-manager and kube-scheduler once the
# API server is ready, then the kubelet. Saves what it changes on the host
# (sysctls, network netns list) so down.sh can put the host back as it was.
#
# Usage: scripts/cluster/up.sh      (root, Debian 12; run build.sh first)
# Prints the admin kubeconfig's path on success; exit 2 on failure.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
. "$here/lib.sh"
. "$here/pki.sh"
. "$here/image.sh"

((EUID == 0)) || cluster_die "up: must run as root"
for b in etcd kube-apiserver kube-controller-manager kube-scheduler kubelet kubectl pause; do
	[[ -x $CLUSTER_BIN/$b ]] || cluster_die "up: $CLUSTER_BIN/$b is missing (run scripts/cluster/build.sh or make cluster)"
done
if [[ -e $CLUSTER_RUN/up ]]; then
	cluster_log "up: the cluster is already up (state in $CLUSTER_RUN); run down.sh first"
	echo "$KUBECONFIG_ADMIN"
	exit 0
fi

# Debian's containerd, runc and CNI plugins (never etcd-server: it starts a
# service of its own).
need=()
command -v containerd >/dev/null || need+=(containerd)
command -v runc >/dev/null || need+=(runc)
if ((${#need[@]})); then
	cluster_log "up: installing ${need[*]} from Debian"
	DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "${need[@]}" >&2 ||
		cluster_die "up: apt-get install ${need[*]} failed"
fi
cni_bin=/usr/lib/cni
if [[ ! -x $cni_bin/bridge ]] &&
	! DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends containernetworking-plugins >&2; then
	# Without Debian's package (no mirror reachable), the cluster's own
	# minimal plugin (cluster/cni) does the same job: bridge, veth, address,
	# the listed routes only.
	[[ -x $CLUSTER_BIN/cni/bridge ]] || cluster_die "up: no CNI plugins: apt-get install containernetworking-plugins failed and $CLUSTER_BIN/cni/bridge is missing"
	cluster_log "up: Debian's containernetworking-plugins could not be installed; using sandcheck's own CNI plugin in $CLUSTER_BIN/cni"
	cni_bin=$CLUSTER_BIN/cni
fi

start=$SECONDS
mkdir -p "$CLUSTER_ROOT" "$CLUSTER_RUN" "$CLUSTER_LOGS"
# If anything below fails, take down what was started.
trap 'rc=$?; if ((rc != 0)); then cluster_log "up: failed, tearing down (logs in $CLUSTER_LOGS)"; for f in "$CLUSTER_LOGS"/*.log; do [[ -s $f ]] && { echo "--- $f" >&2; tail -n 15 "$f" >&2; }; done; bash "$here/down.sh" --keep-logs || true; exit 2; fi' EXIT

# What down.sh restores.
: >"$CLUSTER_RUN/sysctls"
for s in "${CLUSTER_SYSCTLS[@]}"; do
	printf '%s=%s\n' "$s" "$(sysctl -n "$s")" >>"$CLUSTER_RUN/sysctls"
done
ls /run/netns 2>/dev/null >"$CLUSTER_RUN/netns.before" || true
for tool in iptables ip6tables; do
	command -v "$tool-save" >/dev/null || continue
	for table in filter nat mangle; do
		"$tool-save" -t "$table" 2>/dev/null | awk -F'[: ]' -v p="$tool $table" '/^:KUBE-/ {print p, $2}'
	done
done >"$CLUSTER_RUN/chains.before"
for d in /var/log/pods /var/log/containers /var/lib/cni /etc/cni /opt/cni /etc/kubernetes /var/lib/kubelet; do
	[[ -e $d ]] && echo "$d"
done >"$CLUSTER_RUN/dirs.before"
touch "$CLUSTER_RUN/up"

# The node's bridge and the blackholes: the service and pod ranges never
# follow the host's default route off the machine.
ip link add "$NODE_BRIDGE" type bridge
ip addr add "$NODE_IP/24" dev "$NODE_BRIDGE"
ip link set "$NODE_BRIDGE" up
ip route add blackhole "$SERVICE_RANGE"
ip route add blackhole "$POD_RANGE"

pki_make
for n in admin controller-manager scheduler kubelet; do
	pki_kubeconfig "$n" "$CLUSTER_ROOT/$n.kubeconfig"
done

# gVisor under the runc shim: with network=sandbox, runsc refuses the pod
# ("cannot run with network enabled in root network namespace": the shim
# starts it outside the pod's network namespace), so gVisor pods run with
# network=none (loopback only); RUNSC_FLAGS adds or changes flags. The
# wrapper (runsc-wrapper.sh) says what else it changes and why.
runsc_bin=$(command -v runsc || echo /usr/bin/runsc)
sed -e "s|@RUNSC@|$runsc_bin|" -e "s|@FLAGS@|${RUNSC_FLAGS:---network=none}|" \
	"$here/runsc-wrapper.sh" >"$CLUSTER_ROOT/runsc"
chmod 755 "$CLUSTER_ROOT/runsc"

# containerd, apart from Docker's.
mkdir -p "$CLUSTER_ROOT/cni/net.d" "$CLUSTER_ROOT/containerd" "$CLUSTER_ROOT/opt"
cat >"$CLUSTER_ROOT/cni/net.d/10-sandcheck.conflist" <<EOC
{
  "cniVersion": "1.0.0",
  "name": "sandcheck-pods",
  "plugins": [{
    "type": "bridge",
    "bridge": "$POD_BRIDGE",
    "isGateway": true,
    "isDefaultGateway": false,
    "ipMasq": false,
    "hairpinMode": false,
    "ipam": {
      "type": "host-local",
      "dataDir": "$CLUSTER_RUN/cni-ipam",
      "ranges": [[{"subnet": "$POD_SUBNET", "gateway": "$POD_GW"}]],
      "routes": [{"dst": "$NODE_CIDR"}]
    }
  }]
}
EOC
cat >"$CLUSTER_ROOT/containerd.toml" <<EOC
version = 2
root = "$CLUSTER_ROOT/containerd"
state = "$CLUSTER_RUN/containerd"
oom_score = 0

[grpc]
  address = "$CONTAINERD_SOCK"
[ttrpc]
  address = "$CONTAINERD_SOCK.ttrpc"
[debug]
  address = ""
[metrics]
  address = ""

[plugins."io.containerd.internal.v1.opt"]
  path = "$CLUSTER_ROOT/opt"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "$PAUSE_IMAGE"
  restrict_oom_score_adj = true
  enable_selinux = false
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        Root = "$CLUSTER_RUN/runc"
        SystemdCgroup = false
    # gVisor: Debian's runsc ships no containerd shim, so the runc shim runs
    # runsc (through a wrapper that passes its flags) as its OCI runtime.
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runsc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runsc.options]
        BinaryName = "$CLUSTER_ROOT/runsc"
        Root = "$CLUSTER_RUN/runsc"
        SystemdCgroup = false
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "$cni_bin"
    conf_dir = "$CLUSTER_ROOT/cni/net.d"
EOC

# bg NAME CMD...: start a server, its log and pid in $CLUSTER_RUN.
bg() {
	local name=$1
	shift
	setsid "$@" >"$CLUSTER_LOGS/$name.log" 2>&1 </dev/null &
	echo $! >"$CLUSTER_RUN/$name.pid"
}
# wait_for WHAT SECONDS CMD...: poll CMD every 0.25 s until it succeeds.
wait_for() {
	local what=$1 secs=$2
	shift 2
	local deadline=$((SECONDS + secs))
	until "$@" >/dev/null 2>&1; do
		((SECONDS < deadline)) || { cluster_log "up: $what not ready after ${secs}s"; return 1; }
		sleep 0.25
	done
}

bg containerd containerd --config "$CLUSTER_ROOT/containerd.toml"
wait_for containerd 20 ctr --address "$CONTAINERD_SOCK" version

# The sandbox image: a static pause binary in a one-layer image.
if ! cluster_ctr images ls -q | grep -qx "$PAUSE_IMAGE"; then
	oci_image_tar "$PAUSE_IMAGE" "$CLUSTER_BIN/pause" /pause "$CLUSTER_RUN/pause.tar"
	cluster_ctr images import "$CLUSTER_RUN/pause.tar" >/dev/null
	rm -f "$CLUSTER_RUN/pause.tar"
fi

bg etcd "$CLUSTER_BIN/etcd" --name sandcheck --data-dir "$CLUSTER_ROOT/etcd" \
	--listen-client-urls http://127.0.0.1:2379 --advertise-client-urls http://127.0.0.1:2379 \
	--listen-peer-urls http://127.0.0.1:2380 --initial-advertise-peer-urls http://127.0.0.1:2380 \
	--initial-cluster sandcheck=http://127.0.0.1:2380 --listen-metrics-urls http://127.0.0.1:2381
wait_for etcd 20 curl -sf http://127.0.0.1:2379/health

# The API server reaches the kubelet at the node's InternalIP (by name, it
# would ask the machine's resolver). It listens on the node's bridge address (an address these
# scripts own) so that pods can reach it with their service-account token,
# as on a real cluster; nothing else answers there but the kubelet.
bg kube-apiserver "$CLUSTER_BIN/kube-apiserver" \
	--etcd-servers http://127.0.0.1:2379 \
	--bind-address "$NODE_IP" --advertise-address "$NODE_IP" --secure-port "$API_PORT" \
	--service-cluster-ip-range "$SERVICE_RANGE" \
	--client-ca-file "$CLUSTER_PKI/ca.crt" \
	--tls-cert-file "$CLUSTER_PKI/apiserver.crt" --tls-private-key-file "$CLUSTER_PKI/apiserver.key" \
	--kubelet-client-certificate "$CLUSTER_PKI/apiserver-kubelet-client.crt" \
	--kubelet-client-key "$CLUSTER_PKI/apiserver-kubelet-client.key" \
	--kubelet-preferred-address-types InternalIP \
	--service-account-issuer https://kubernetes.default.svc \
	--service-account-key-file "$CLUSTER_PKI/sa.pub" \
	--service-account-signing-key-file "$CLUSTER_PKI/sa.key" \
	--authorization-mode Node,RBAC --allow-privileged=true \
	--enable-admission-plugins NodeRestriction,ResourceQuota,LimitRanger,ServiceAccount \
	--profiling=false
wait_for "kube-apiserver /readyz" 60 curl -sf --cacert "$CLUSTER_PKI/ca.crt" "$API_URL/readyz"

# Started only now: earlier, the controller-manager exits and no default
# ServiceAccount ever appears.
bg kube-controller-manager "$CLUSTER_BIN/kube-controller-manager" \
	--kubeconfig "$CLUSTER_ROOT/controller-manager.kubeconfig" \
	--authentication-kubeconfig "$CLUSTER_ROOT/controller-manager.kubeconfig" \
	--authorization-kubeconfig "$CLUSTER_ROOT/controller-manager.kubeconfig" \
	--bind-address 127.0.0.1 --leader-elect=false --use-service-account-credentials \
	--service-account-private-key-file "$CLUSTER_PKI/sa.key" --root-ca-file "$CLUSTER_PKI/ca.crt" \
	--cluster-signing-cert-file "$CLUSTER_PKI/ca.crt" --cluster-signing-key-file "$CLUSTER_PKI/ca.key" \
	--profiling=false
bg kube-scheduler "$CLUSTER_BIN/kube-scheduler" \
	--kubeconfig "$CLUSTER_ROOT/scheduler.kubeconfig" \
	--authentication-kubeconfig "$CLUSTER_ROOT/scheduler.kubeconfig" \
	--authorization-kubeconfig "$CLUSTER_ROOT/scheduler.kubeconfig" \
	--bind-address 127.0.0.1 --leader-elect=false --profiling=false

mkdir -p "$CLUSTER_ROOT/kubelet"
cat >"$CLUSTER_ROOT/kubelet.yaml" <<EOC
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: $NODE_IP
port: 10250
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: 10248
failCgroupV1: false
cgroupDriver: cgroupfs
containerRuntimeEndpoint: unix://$CONTAINERD_SOCK
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: true}
  x509: {clientCAFile: $CLUSTER_PKI/ca.crt}
authorization: {mode: Webhook}
tlsCertFile: $CLUSTER_PKI/kubelet.crt
tlsPrivateKeyFile: $CLUSTER_PKI/kubelet.key
resolvConf: ""
failSwapOn: false
maxPods: 40
serializeImagePulls: false
enableServer: true
evictionHard: {memory.available: "100Mi", nodefs.available: "2%", imagefs.available: "2%"}
imageGCHighThresholdPercent: 100
EOC
# The node's seccomp profiles, as a node pool's provisioning installs them
# (a pod names one with seccompProfile type Localhost): sandcheck/nocaps.json
# is the upstream Docker default resolved for a pod without capabilities,
# in the OCI format containerd reads (fixtures/kubernetes/seccomp-nocaps.json;
# runners/kubernetes/seccomp_test.go derives it). down.sh removes it with
# the kubelet's folder.
mkdir -p "$CLUSTER_ROOT/kubelet/seccomp/sandcheck"
cp "$here/../../fixtures/kubernetes/seccomp-nocaps.json" "$CLUSTER_ROOT/kubelet/seccomp/sandcheck/nocaps.json"

bg kubelet "$CLUSTER_BIN/kubelet" --config "$CLUSTER_ROOT/kubelet.yaml" \
	--kubeconfig "$CLUSTER_ROOT/kubelet.kubeconfig" --root-dir "$CLUSTER_ROOT/kubelet" \
	--hostname-override "$NODE_NAME" --node-ip "$NODE_IP"

wait_for "node $NODE_NAME Ready" 60 bash -c "'$CLUSTER_BIN/kubectl' --kubeconfig '$KUBECONFIG_ADMIN' get node '$NODE_NAME' -o jsonpath='{.status.conditions[?(@.type==\"Ready\")].status}' | grep -qx True"
wait_for "default ServiceAccount" 60 cluster_kubectl -n default get serviceaccount default

# The sandbox images the fixtures name, from the local Docker engine (the
# nodes never pull): CLUSTER_IMAGES, space-separated.
for img in ${CLUSTER_IMAGES-sandcheck/runner:dev}; do
	if docker image inspect "$img" >/dev/null 2>&1; then
		docker save "$img" | cluster_ctr images import - >/dev/null
	else
		cluster_log "up: image $img is not in Docker (make images); pods naming it will not start"
	fi
done

# The RuntimeClasses the fleets name: runc and gVisor (runsc).
cluster_kubectl apply -f - >/dev/null <<EOC
apiVersion: node.k8s.io/v1
kind: RuntimeClass
metadata: {name: runc}
handler: runc
---
apiVersion: node.k8s.io/v1
kind: RuntimeClass
metadata: {name: gvisor}
handler: runsc
EOC
trap - EXIT
cluster_log "up: ready in $((SECONDS - start)) s; admin kubeconfig $KUBECONFIG_ADMIN"
echo "$KUBECONFIG_ADMIN"
