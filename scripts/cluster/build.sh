#!/usr/bin/env bash
# Build the single-node cluster's binaries from Go modules (cluster/kubernetes
# and cluster/etcd wrapper modules): kube-apiserver, kube-controller-manager,
# kube-scheduler, kubelet, kubectl at Kubernetes v1.37.2, etcd at v3.7.0, and
# a static pause binary for the sandbox image and a minimal CNI plugin
# (used only when Debian's containernetworking-plugins cannot be installed). Cached: a binary whose
# --version already reports the wanted version is not rebuilt.
#
# The built Kubernetes and etcd binaries are also kept in a cache outside the
# checkout, keyed by everything that decides them (the wrapper modules, this
# script, the Go version), so a fresh clone on a machine that built them once
# (CI's clone, a second worktree) copies them instead of spending about 13
# minutes of two cores on the same build.
#
# Usage: scripts/cluster/build.sh [bin-dir]   (default: bin/cluster)
# Env:   CLUSTER_BUILD_JOBS   go build -p (default: nproc)
#        CLUSTER_BUILD_CACHE  the cache folder (default:
#                             ${XDG_CACHE_HOME:-~/.cache}/sandcheck/cluster);
#                             "off" builds without it
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
bin=${1:-$root/bin/cluster}
mkdir -p "$bin"
bin=$(cd "$bin" && pwd)

K8S_VERSION=v1.37.2
ETCD_VERSION=v3.7.0
jobs=${CLUSTER_BUILD_JOBS:-$(nproc)}

log() { printf 'cluster-build: %s\n' "$*" >&2; }

# has_version FILE WANT ARGS...: FILE exists, runs, and prints WANT.
has_version() {
	local file=$1 want=$2
	shift 2
	[[ -x $file ]] || return 1
	local out
	out=$("$file" "$@" 2>&1 | sed -n 1,5p) || return 1
	[[ $out == *"$want"* ]]
}

k8s_cmds=(kube-apiserver kube-controller-manager kube-scheduler kubelet kubectl)
cached_bins=("${k8s_cmds[@]}" etcd)

# cache_key prints a digest of every input of the Kubernetes and etcd builds.
cache_key() {
	{
		cat "$root"/cluster/kubernetes/go.mod "$root"/cluster/kubernetes/go.sum \
			"$root"/cluster/etcd/go.mod "$root"/cluster/etcd/go.sum "${BASH_SOURCE[0]}"
		go env GOVERSION GOARCH
		echo "$K8S_VERSION $ETCD_VERSION"
	} | sha256sum | cut -c1-16
}

cache=""
if [[ ${CLUSTER_BUILD_CACHE:-} != off ]]; then
	cache=${CLUSTER_BUILD_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/sandcheck/cluster}/$(cache_key)
	if [[ -f $cache/complete ]]; then
		for c in "${cached_bins[@]}"; do
			[[ -x $bin/$c ]] && cmp -s "$cache/$c" "$bin/$c" && continue
			cp "$cache/$c" "$bin/$c.tmp" && mv -f "$bin/$c.tmp" "$bin/$c"
		done
		log "kubernetes and etcd binaries copied from the cache $cache"
	fi
fi
need_k8s=()
for c in "${k8s_cmds[@]}"; do
	args=(--version)
	[[ $c == kubectl ]] && args=(version --client)
	if ! has_version "$bin/$c" "$K8S_VERSION" "${args[@]}"; then
		need_k8s+=("$c")
	fi
done

if ((${#need_k8s[@]})); then
	log "building ${need_k8s[*]} $K8S_VERSION (about 13 min on 2 idle cores)"
	major=${K8S_VERSION#v}
	major=${major%%.*}
	minor=${K8S_VERSION#v*.}
	minor=${minor%%.*}
	ld=""
	for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
		ld+=" -X $pkg.gitVersion=$K8S_VERSION -X $pkg.gitMajor=$major -X $pkg.gitMinor=$minor -X $pkg.gitTreeState=clean"
	done
	pkgs=()
	for c in "${need_k8s[@]}"; do pkgs+=("k8s.io/kubernetes/cmd/$c"); done
	start=$SECONDS
	(cd "$root/cluster/kubernetes" &&
		CGO_ENABLED=0 go build -p "$jobs" -trimpath -ldflags "-s -w$ld" -o "$bin/" "${pkgs[@]}")
	log "kubernetes built in $((SECONDS - start)) s"
else
	log "kubernetes $K8S_VERSION binaries up to date in $bin"
fi

if ! has_version "$bin/etcd" "${ETCD_VERSION#v}" --version; then
	log "building etcd $ETCD_VERSION"
	start=$SECONDS
	(cd "$root/cluster/etcd" &&
		CGO_ENABLED=0 go build -p "$jobs" -trimpath \
			-ldflags "-s -w" -o "$bin/etcd" go.etcd.io/etcd/server/v3)
	log "etcd built in $((SECONDS - start)) s"
else
	log "etcd $ETCD_VERSION up to date in $bin"
fi

# Keep what was built (or checked) for the next clone: written to a
# temporary folder and renamed, so a killed build never leaves a cache that
# looks complete.
if [[ -n $cache && ! -f $cache/complete ]]; then
	mkdir -p "${cache%/*}"
	tmp=$(mktemp -d "${cache%/*}/.tmp.XXXXXX")
	for c in "${cached_bins[@]}"; do cp "$bin/$c" "$tmp/$c"; done
	touch "$tmp/complete"
	rm -rf "$cache"
	mv "$tmp" "$cache"
	log "kubernetes and etcd binaries kept in the cache $cache"
fi

# The pause binary and the fallback CNI plugin are tiny; rebuilding them
# is cheaper than tracking them.
(cd "$root/cluster/pause" && CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "$bin/pause" .)
mkdir -p "$bin/cni"
(cd "$root/cluster/cni" && CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "$bin/cni/bridge" .)
ln -f "$bin/cni/bridge" "$bin/cni/loopback"
log "done: $(ls "$bin" | tr '\n' ' ')"
