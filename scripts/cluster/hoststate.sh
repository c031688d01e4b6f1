#!/usr/bin/env bash
# Print the host state the cluster may change, one sorted line per item, for
# comparing before up.sh with after down.sh (scripts/cluster/test.sh):
# the sysctls the kubelet and CNI touch, mount points, cgroup folders (two
# levels), network links, routes, iptables chains, network namespaces and
# the folders the kubelet and containerd may create, and the cluster's own
# processes. Docker's own churn (containers other engineers or tests start
# meanwhile) is left out: it is not the cluster's doing.
set -uo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
. "$here/lib.sh"

# The harness's own per-run links (scbr-, scnb-, scat-, ifb) and the bwrap
# and process runners' sandboxes (scbw- cgroups, /run/sandcheck-bwrap
# mounts) belong to sandcheck runs that other tests start meanwhile,
# likewise; the cluster names none of its things so. So do the per-command
# cgroups this development machine's own supervisor makes (process_api/).
noise='/var/lib/docker|/run/docker|/docker/|docker[-/]|/moby|veth|br-[0-9a-f]|scbr-|scnb-|scat-|scbw-|/run/sandcheck-bwrap/|/process_api/|ifb[0-9]|^netns |sandcheck-run-|/tmp/'
{
	for s in "${CLUSTER_SYSCTLS[@]}" net.bridge.bridge-nf-call-iptables; do
		echo "sysctl $s=$(sysctl -n "$s" 2>/dev/null)"
	done
	awk '{print "mount " $5}' /proc/self/mountinfo
	find /sys/fs/cgroup -mindepth 1 -maxdepth 3 -type d 2>/dev/null | sed 's/^/cgroup /'
	ip -o link show | awk -F': ' '{sub(/@.*/, "", $2); print "link " $2}'
	ip route show table all type unicast 2>/dev/null | sed 's/^/route /'
	ip route show type blackhole | sed 's/^/route /'
	for t in filter nat mangle; do
		iptables-save -t "$t" 2>/dev/null | awk -v t="$t" '/^:/ {print "chain " t " " $1}'
	done
	ls /run/netns 2>/dev/null | sed 's/^/netns /'
	for d in /var/log/pods /var/log/containers /var/lib/cni /etc/cni /opt/cni /etc/kubernetes /var/lib/kubelet "$CLUSTER_RUN" /run/containerd/runc/k8s.io; do
		[[ -e $d ]] && echo "path $d"
	done
	for p in /proc/[0-9]*; do
		c=$(tr '\0' ' ' <"$p/cmdline" 2>/dev/null) || continue
		case $c in *"$CLUSTER_RUN"* | *"$CLUSTER_ROOT"*) ;; *) continue ;; esac
		case $c in *hoststate.sh* | *grep* | *awk*) continue ;; esac
		echo "process $c"
	done
} 2>/dev/null | grep -Ev "$noise" | sort -u
