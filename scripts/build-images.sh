#!/usr/bin/env bash
# Builds sandcheck's first-party images from fixtures/images/ with the local
# Docker engine. Each image carries a label with a hash of all its inputs (the
# build context, the host files copied into it, this script); an image whose
# label already matches is not rebuilt, so a second run does nothing and says
# nothing.
#
#   BUSYBOX  the static busybox copied into the runner image (default /bin/busybox,
#            from Debian's busybox-static)
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
readonly root
readonly LABEL=dev.sandcheck.inputs
readonly BUSYBOX=${BUSYBOX:-/bin/busybox}

say() { printf 'images: %s\n' "$*"; }
die() {
	printf 'images: error: %s\n' "$*" >&2
	exit 1
}

# inputs_hash DIR EXTRA... hashes every file under DIR (by relative path and
# content), each EXTRA file, and this script.
inputs_hash() {
	local dir=$1 f
	shift
	{
		(cd "$dir" && find . -type f -print0 | LC_ALL=C sort -z | xargs -0 -r sha256sum)
		for f in "$@" "${BASH_SOURCE[0]}"; do
			printf '%s  %s\n' "$(sha256sum <"$f" | cut -d' ' -f1)" "extra:$(basename "$f")"
		done
	} | sha256sum | cut -d' ' -f1
}

# build_image TAG DIR EXTRA... builds DIR with each EXTRA file copied into the
# context root, unless TAG already carries the same inputs hash.
build_image() {
	local tag=$1 dir=$2
	shift 2
	local hash have old_id ctx log out
	hash=sha256:$(inputs_hash "$dir" "$@")
	have=$(docker image inspect --format "{{index .Config.Labels \"$LABEL\"}}" "$tag" 2>/dev/null || true)
	[[ $have == "$hash" ]] && return 0
	old_id=$(docker image inspect --format '{{.Id}}' "$tag" 2>/dev/null || true)

	ctx=$(mktemp -d /tmp/sandcheck-image.XXXXXX)
	log=$ctx.log
	cp -a "$dir/." "$ctx/"
	local f
	for f in "$@"; do
		cp "$f" "$ctx/$(basename "$f")"
	done
	# No network: nothing in a first-party image is downloaded at build time.
	if ! docker build --network none --label "$LABEL=$hash" -t "$tag" "$ctx" >"$log" 2>&1; then
		tail -n 30 "$log" >&2
		rm -rf "$ctx"
		die "building $tag failed (log: $log)"
	fi
	rm -rf "$ctx" "$log"
	if ! out=$(docker run --rm --network none "$tag" /bin/sh -c 'ls / >/dev/null && echo ok' 2>&1) || [[ $out != ok ]]; then
		die "$tag was built but does not run a shell: $out"
	fi
	if [[ -n $old_id && $old_id != "$(docker image inspect --format '{{.Id}}' "$tag")" ]]; then
		docker image rm "$old_id" >/dev/null 2>&1 || true # still used by a container: leave it
	fi
	say "built $tag ($hash)"
}

main() {
	docker info --format '{{.ServerVersion}}' >/dev/null 2>&1 ||
		die "the Docker engine does not answer; run 'make setup' (or start dockerd)"
	[[ -f $BUSYBOX ]] || die "$BUSYBOX not found; install busybox-static ('make setup')"
	bash "$root/scripts/check-static.sh" "$BUSYBOX" || die "the runner image has no libc: install busybox-static ('make setup')"

	build_image sandcheck/runner:dev "$root/fixtures/images/runner" "$BUSYBOX"
}

main "$@"
