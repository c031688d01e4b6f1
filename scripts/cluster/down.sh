#!/usr/bin/env bash
# Stop the sandcheck cluster and put the host back as it was before up.sh:
# pods deleted, servers stopped, containerd's tasks and shims gone, every
# mount under the cluster's folders (the kubelet's bind mount of its own
# root included) and the pods' network namespaces unmounted, the /kubepods
# cgroups removed, the kubelet's iptables chains removed, the sysctls the
# kubelet and the CNI plugin changed restored, bridges and blackhole routes
# deleted. Safe to run twice, or after a failed up.sh.
#
# Usage: scripts/cluster/down.sh [--keep-logs]
set -uo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
. "$here/lib.sh"

keep_logs=false
[[ ${1:-} == --keep-logs ]] && keep_logs=true
((EUID == 0)) || cluster_die "down: must run as root"
start=$SECONDS

# 1. Pods first, while the kubelet can still stop their sandboxes (CNI DEL).
if [[ -x $CLUSTER_BIN/kubectl && -s $KUBECONFIG_ADMIN ]] &&
	curl -sf --max-time 2 --cacert "$CLUSTER_PKI/ca.crt" "$API_URL/readyz" >/dev/null 2>&1; then
	timeout 15 "$CLUSTER_BIN/kubectl" --kubeconfig "$KUBECONFIG_ADMIN" delete pods --all -A \
		--grace-period=0 --force --wait=false >/dev/null 2>&1 || true
	for _ in $(seq 1 40); do
		[[ -z $(ctr --address "$CONTAINERD_SOCK" -n k8s.io tasks ls -q 2>/dev/null) ]] && break
		sleep 0.25
	done
fi

# stop NAME: SIGTERM the server, SIGKILL after 10 s.
stop() {
	local pidf=$CLUSTER_RUN/$1.pid pid
	[[ -s $pidf ]] || return 0
	pid=$(<"$pidf")
	if kill -0 "$pid" 2>/dev/null; then
		kill -TERM "$pid" 2>/dev/null
		for _ in $(seq 1 40); do
			kill -0 "$pid" 2>/dev/null || break
			sleep 0.25
		done
		kill -KILL "$pid" 2>/dev/null
	fi
	rm -f "$pidf"
}
for s in kubelet kube-scheduler kube-controller-manager kube-apiserver etcd; do stop "$s"; done

# 2. containerd's remaining tasks, then containerd, then any shim or runsc
# process still naming the cluster's folders.
if ctr --address "$CONTAINERD_SOCK" version >/dev/null 2>&1; then
	for t in $(ctr --address "$CONTAINERD_SOCK" -n k8s.io tasks ls -q 2>/dev/null); do
		ctr --address "$CONTAINERD_SOCK" -n k8s.io tasks kill -s SIGKILL "$t" >/dev/null 2>&1
	done
	sleep 0.5
	for t in $(ctr --address "$CONTAINERD_SOCK" -n k8s.io tasks ls -q 2>/dev/null); do
		ctr --address "$CONTAINERD_SOCK" -n k8s.io tasks delete -f "$t" >/dev/null 2>&1
	done
	for c in $(ctr --address "$CONTAINERD_SOCK" -n k8s.io containers ls -q 2>/dev/null); do
		ctr --address "$CONTAINERD_SOCK" -n k8s.io containers delete "$c" >/dev/null 2>&1
	done
fi
stop containerd
for p in /proc/[0-9]*; do
	case $(readlink "$p/exe" 2>/dev/null) in
	*/containerd-shim* | */runsc | */runc) ;;
	*) continue ;;
	esac
	tr '\0' ' ' <"$p/cmdline" 2>/dev/null | grep -qF -e "$CONTAINERD_SOCK" -e "$CLUSTER_RUN/" &&
		kill -KILL "${p#/proc/}" 2>/dev/null
done

# 3. Mounts under the cluster's folders, deepest first, and the pods'
# network namespaces up.sh did not find.
for _ in 1 2 3; do
	mapfile -t mnts < <(awk '{print $5}' /proc/self/mountinfo | grep -E "^($CLUSTER_ROOT|$CLUSTER_RUN)(/|$)" | sort -r)
	((${#mnts[@]})) || break
	for m in "${mnts[@]}"; do umount "$m" 2>/dev/null || umount -l "$m" 2>/dev/null; done
done
if [[ -d /run/netns ]]; then
	for ns in /run/netns/cni-*; do
		[[ -e $ns ]] || continue
		grep -qxF "$(basename "$ns")" "$CLUSTER_RUN/netns.before" 2>/dev/null && continue
		umount "$ns" 2>/dev/null || umount -l "$ns" 2>/dev/null
		rm -f "$ns"
	done
fi

# 4. The kubelet's cgroups (cgroupfs driver: /kubepods in each hierarchy).
for h in /sys/fs/cgroup/*/; do
	[[ -d $h/kubepods ]] || continue
	find "$h/kubepods" -depth -type d -exec rmdir {} \; 2>/dev/null
done

# 5. The kubelet's iptables chains (KUBE-*), which up.sh did not find.
for tool in iptables ip6tables; do
	command -v "$tool-save" >/dev/null || continue
	for table in filter nat mangle; do
		for chain in $("$tool-save" -t "$table" 2>/dev/null | awk -F'[: ]' '/^:KUBE-/ {print $2}'); do
			grep -qxF "$tool $table $chain" "$CLUSTER_RUN/chains.before" 2>/dev/null && continue
			# The jumps into it first (the kubelet's KUBE-FIREWALL is jumped
			# to from INPUT and OUTPUT), else it cannot be deleted.
			"$tool-save" -t "$table" 2>/dev/null | grep -E -- "^-A [^ ]+ .*-j $chain( |\$)" | sed 's/^-A /-D /' |
				while read -r rule; do eval "\"\$tool\" -t \"\$table\" $rule" 2>/dev/null; done
			"$tool" -t "$table" -F "$chain" 2>/dev/null
			"$tool" -t "$table" -X "$chain" 2>/dev/null
		done
	done
done

# 6. Kernel settings back as up.sh found them.
if [[ -s $CLUSTER_RUN/sysctls ]]; then
	while IFS== read -r k v; do
		[[ $(sysctl -n "$k" 2>/dev/null) == "$v" ]] || sysctl -qw "$k=$v" >/dev/null
	done <"$CLUSTER_RUN/sysctls"
fi

# 7. Network: bridges (their veths went with the pods' namespaces) and the
# blackhole routes.
for l in "$POD_BRIDGE" "$NODE_BRIDGE"; do
	ip link show "$l" >/dev/null 2>&1 && ip link delete "$l"
done
for r in "$SERVICE_RANGE" "$POD_RANGE"; do
	ip route show type blackhole "$r" 2>/dev/null | grep -q . && ip route delete blackhole "$r"
done

# 8. Files: folders the kubelet and containerd made outside the cluster's
# own, which up.sh did not find; the cluster's per-run state.
if [[ -e $CLUSTER_RUN/dirs.before ]]; then
	for d in /var/log/pods /var/log/containers /var/lib/cni /etc/cni /opt/cni /etc/kubernetes /var/lib/kubelet; do
		[[ -e $d ]] && ! grep -qxF "$d" "$CLUSTER_RUN/dirs.before" && rm -rf "$d"
	done
fi
rm -rf "$CLUSTER_ROOT/etcd" "$CLUSTER_ROOT/kubelet"
if $keep_logs && [[ -d $CLUSTER_LOGS ]]; then
	rm -rf "$CLUSTER_ROOT/last-logs"
	mv "$CLUSTER_LOGS" "$CLUSTER_ROOT/last-logs"
	cluster_log "down: logs kept in $CLUSTER_ROOT/last-logs"
fi
rm -rf "$CLUSTER_RUN"
cluster_log "down: done in $((SECONDS - start)) s"
