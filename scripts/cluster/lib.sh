# Shared settings of the sandcheck single-node cluster (sourced by up.sh,
# down.sh, hoststate.sh). Every address is loopback or on the two bridges
# these scripts create; nothing routes off the machine.

CLUSTER_REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
CLUSTER_BIN=${CLUSTER_BIN:-$CLUSTER_REPO/bin/cluster}
# Persistent state (certificates, etcd, containerd's images) and runtime
# state (sockets, pids, logs).
CLUSTER_ROOT=${CLUSTER_ROOT:-/var/lib/sandcheck-cluster}
CLUSTER_RUN=${CLUSTER_RUN:-/run/sandcheck-cluster}
CLUSTER_LOGS=$CLUSTER_RUN/logs
CLUSTER_PKI=$CLUSTER_ROOT/pki

NODE_NAME=sandcheck-node
# The node's bridge: the kubelet and the API server listen on NODE_IP.
NODE_BRIDGE=sckube0
NODE_IP=10.77.0.1
NODE_CIDR=10.77.0.0/24
# The pods' CNI bridge: no default gateway, no masquerade; the one route
# the pods get leads to the node's bridge (the API server and kubelet).
POD_BRIDGE=sckube1
POD_GW=10.78.0.1
POD_SUBNET=10.78.0.0/24
POD_RANGE=10.78.0.0/16
SERVICE_RANGE=10.96.0.0/16
SERVICE_IP=10.96.0.1

API_PORT=6443
API_URL=https://$NODE_IP:$API_PORT
CONTAINERD_SOCK=$CLUSTER_RUN/containerd.sock
KUBECONFIG_ADMIN=$CLUSTER_ROOT/admin.kubeconfig
PAUSE_IMAGE=sandcheck.local/pause:3.10

# The kernel settings the kubelet and the CNI bridge plugin change; up.sh
# saves them, down.sh puts them back.
CLUSTER_SYSCTLS=(vm.overcommit_memory vm.panic_on_oom kernel.panic kernel.panic_on_oops
	kernel.keys.root_maxkeys kernel.keys.root_maxbytes net.ipv4.ip_forward)

cluster_log() { printf 'cluster: %s\n' "$*" >&2; }
cluster_die() {
	printf 'cluster: %s\n' "$*" >&2
	exit 2
}

# cluster_kubectl runs the cluster's own kubectl as the admin.
cluster_kubectl() { "$CLUSTER_BIN/kubectl" --kubeconfig "$KUBECONFIG_ADMIN" "$@"; }

# cluster_ctr runs ctr against the cluster's own containerd.
cluster_ctr() { ctr --address "$CONTAINERD_SOCK" --namespace k8s.io "$@"; }
