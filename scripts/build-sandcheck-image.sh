#!/usr/bin/env bash
# Builds an image of sandcheck itself (examples/image/Dockerfile) with the
# local Docker engine, from this checkout, without any registry: the static
# binaries are built here, and a static busybox and the host's iptables (with
# the libraries ldd names and its extensions) are staged into the context.
#
#   scripts/build-sandcheck-image.sh [TAG]     default TAG: sandcheck:dev
#
# Needs go, docker, busybox-static and iptables (scripts/setup.sh installs
# them). Prints the image ID and checks that `sandcheck version` runs in it.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
readonly root
readonly tag=${1:-sandcheck:dev}
readonly BUSYBOX=${BUSYBOX:-/bin/busybox}
version=${VERSION:-$(git -C "$root" describe --always --dirty 2>/dev/null || echo dev)}
readonly version

say() { printf 'sandcheck-image: %s\n' "$*"; }
die() {
	printf 'sandcheck-image: error: %s\n' "$*" >&2
	exit 1
}

for tool in go docker ldd; do
	command -v "$tool" >/dev/null || die "$tool is not installed (run scripts/setup.sh)"
done
[[ -x $BUSYBOX ]] || die "no static busybox at $BUSYBOX (apt-get install busybox-static)"

ctx=$(mktemp -d /tmp/sandcheck-image.XXXXXX)
trap 'rm -rf "$ctx"' EXIT
rootfs=$ctx/rootfs
mkdir -p "$rootfs/usr/local/bin" "$rootfs/bin" "$rootfs/usr/sbin" "$rootfs/opt/sandcheck" "$rootfs/tmp" "$rootfs/work" "$rootfs/out"
chmod 1777 "$rootfs/tmp"

say "building static sandcheck and sandcheck-probe ($version)"
(
	cd "$root"
	CGO_ENABLED=0 go build -trimpath -ldflags "-s -w -X main.version=$version" -o "$rootfs/usr/local/bin/sandcheck" ./cmd/sandcheck
	CGO_ENABLED=0 go build -trimpath -ldflags "-s -w -X main.version=$version" -o "$rootfs/usr/local/bin/sandcheck-probe" ./cmd/sandcheck-probe
)
bash "$root/scripts/check-static.sh" "$rootfs/usr/local/bin/sandcheck-probe" || die "the probe is not static"
cp "$BUSYBOX" "$rootfs/bin/busybox"

# copy_with_libs FILE: FILE and every library ldd names for it, at the same
# paths, so the dynamic loader finds them in the image.
copy_with_libs() {
	local f=$1 lib
	mkdir -p "$rootfs$(dirname "$f")"
	cp -L "$f" "$rootfs$f"
	while read -r lib; do
		[[ -n $lib && -e $lib ]] || continue
		mkdir -p "$rootfs$(dirname "$lib")"
		cp -L "$lib" "$rootfs$lib"
	done < <(ldd "$f" 2>/dev/null | awk '/=>/ { print $3 } /^\t\/[^ ]+ \(/ { print $1 }')
}

multi=""
for m in /usr/sbin/xtables-nft-multi /usr/sbin/xtables-legacy-multi; do
	[[ -x $m ]] || continue
	copy_with_libs "$m"
	multi=${multi:-$m}
done
[[ -n $multi ]] || die "no iptables (xtables-*-multi) on this host (apt-get install iptables)"
backend=$(readlink -f /usr/sbin/iptables || echo "$multi")
for cmd in iptables iptables-save iptables-restore ip6tables ip6tables-save ip6tables-restore; do
	ln -sf "$(basename "$backend")" "$rootfs/usr/sbin/$cmd"
done
for d in /usr/lib/x86_64-linux-gnu/xtables /usr/lib/aarch64-linux-gnu/xtables /usr/lib/xtables; do
	if [[ -d $d ]]; then
		mkdir -p "$rootfs$d"
		cp -a "$d/." "$rootfs$d/"
		for so in "$d"/*.so; do
			copy_with_libs "$so"
		done
	fi
done

cp -a "$root/fixtures" "$rootfs/opt/sandcheck/fixtures"
cp "$root/examples/image/Dockerfile" "$ctx/Dockerfile"

say "building $tag"
docker build -q --label "dev.sandcheck.version=$version" -t "$tag" "$ctx"
docker run --rm --network none "$tag" version >/dev/null || die "sandcheck does not run in $tag"
docker run --rm --network none --entrypoint /usr/sbin/iptables "$tag" --version >/dev/null || die "iptables does not run in $tag"
say "built $tag: $(docker image inspect -f '{{.Id}}' "$tag")"
