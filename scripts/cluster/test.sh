#!/usr/bin/env bash
# The cluster's own test: the host's state is snapshotted, the cluster comes
# up (in under a minute once built), runs a pod under each RuntimeClass and
# the command given after --, goes down, and the host's state must be
# exactly as before (sysctls, mounts, cgroups, links, routes, iptables
# chains, folders, processes: hoststate.sh). Exit 1 on any failure.
#
# Usage: scripts/cluster/test.sh [-- CMD...]
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
. "$here/lib.sh"
[[ ${1:-} == -- ]] && shift
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail=0

if [[ -e $CLUSTER_RUN/up ]]; then
	echo "cluster-test: a cluster is already up; run scripts/cluster/down.sh first" >&2
	exit 2
fi
bash "$here/hoststate.sh" >"$work/before"
t0=$SECONDS
if ! bash "$here/up.sh" >/dev/null; then
	echo "cluster-test: FAIL up.sh" >&2
	exit 1
fi
up=$((SECONDS - t0))
echo "cluster-test: up in ${up}s"
((up <= 60)) || { echo "cluster-test: FAIL up took ${up}s (floor 60s)" >&2; fail=1; }

# A pod under each RuntimeClass runs to completion and its log is read.
for rc in runc gvisor; do
	cluster_kubectl apply -f - >/dev/null <<EOP
apiVersion: v1
kind: Pod
metadata: {name: smoke-$rc, namespace: default}
spec:
  runtimeClassName: $rc
  restartPolicy: Never
  automountServiceAccountToken: false
  containers:
  - name: c
    image: $PAUSE_IMAGE
    imagePullPolicy: Never
    command: ["/pause"]
EOP
	if cluster_kubectl wait --for=jsonpath='{.status.phase}'=Running pod/smoke-$rc --timeout=60s >/dev/null 2>&1; then
		echo "cluster-test: pod under RuntimeClass $rc Running"
	else
		echo "cluster-test: FAIL pod under RuntimeClass $rc did not run:" >&2
		cluster_kubectl describe pod smoke-$rc | tail -n 12 >&2
		fail=1
	fi
	cluster_kubectl delete pod smoke-$rc --grace-period=0 --force >/dev/null 2>&1 || true
done

if (($#)); then
	echo "cluster-test: running $*"
	KUBECONFIG=$KUBECONFIG_ADMIN SANDCHECK_KUBECONFIG=$KUBECONFIG_ADMIN "$@" || { echo "cluster-test: FAIL $*" >&2; fail=1; }
fi

t0=$SECONDS
bash "$here/down.sh"
echo "cluster-test: down in $((SECONDS - t0))s"
bash "$here/hoststate.sh" >"$work/after"
if ! diff -u "$work/before" "$work/after" >"$work/diff"; then
	echo "cluster-test: FAIL the host is not as it was before the cluster:" >&2
	cat "$work/diff" >&2
	fail=1
else
	echo "cluster-test: host state unchanged ($(wc -l <"$work/before") items compared)"
fi
((fail == 0)) && echo "cluster-test: PASS"
exit "$fail"
