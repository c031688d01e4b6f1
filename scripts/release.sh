#!/usr/bin/env bash
# release.sh [OUTDIR]: the release artifacts of this checkout, made and
# signed with sandcheck's own supply-chain code (make release).
#
#   OUTDIR (default dist/VERSION) must not exist or be empty. It receives:
#     sandcheck_VERSION_linux_ARCH         the CLI (static, stripped; it embeds
#                                          the probe for ARCH)
#     sandcheck-probe_VERSION_linux_ARCH   the probe alone (static, stripped)
#     sandcheck-image_VERSION_linux_amd64.tar
#                                          the tool's container image (docker
#                                          save; with IMAGE=0, none)
#     FILE.spdx.json                       a syft SBOM of each of the above
#                                          (`sandcheck image sbom file:FILE`)
#     SHA256SUMS                           sha256sum -c checks every file
#     bundle.intoto.json                   one in-toto statement naming every
#                                          file with its digest, signed with
#                                          KEY (`sandcheck report sign`)
#   `sandcheck report verify OUTDIR --key cosign.pub` checks them all.
#
# Environment:
#   KEY        cosign private key (required; its password in COSIGN_PASSWORD;
#              `sandcheck image keygen --dir DIR` makes a pair)
#   VERSION    the version stamped into the binaries (default: git describe)
#   ARCHES     default "amd64 arm64"
#   IMAGE      1 (default) builds the tool image (needs Docker), 0 does not
#   PUSH       a loopback registry repository (127.0.0.1:PORT/NAME): the
#              image is pushed there, signed with KEY and its SBOM attested
#              (`sandcheck image sign --attest-sbom`); verify with
#              `sandcheck image verify REF --key cosign.pub --sbom`
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
readonly root
say() { printf 'release: %s\n' "$*"; }
die() {
	printf 'release: error: %s\n' "$*" >&2
	exit 1
}

version=${VERSION:-$(git -C "$root" describe --tags --always --dirty 2>/dev/null || echo dev)}
[[ $version =~ ^[A-Za-z0-9._+-]+$ ]] || die "VERSION $version: only letters, digits and ._+- may name a release"
readonly version
out=${1:-$root/dist/$version}
arches=${ARCHES:-amd64 arm64}
[[ -n ${KEY:-} ]] || die "KEY is not set: name a cosign private key (sandcheck image keygen --dir DIR makes one)"
[[ -f $KEY ]] || die "KEY $KEY: no such file"
if [[ -e $out ]] && [[ -n $(ls -A "$out") ]]; then
	die "$out is not empty: a release folder holds only that release's files"
fi
mkdir -p "$out"
out=$(cd "$out" && pwd)
readonly out

host_arch=$(cd "$root" && go env GOARCH)
sc=""
cd "$root"
for arch in $arches; do
	case $arch in amd64 | arm64) ;; *) die "ARCHES: unsupported architecture $arch (amd64 or arm64)" ;; esac
	say "building sandcheck $version for linux/$arch"
	CGO_ENABLED=0 GOOS=linux GOARCH=$arch GOAMD64=v1 go build -trimpath -buildvcs=false \
		-ldflags "-s -w -X main.version=$version" -o "$out/sandcheck_${version}_linux_$arch" ./cmd/sandcheck
	bash scripts/build-probe.sh "$out/sandcheck-probe_${version}_linux_$arch" "$arch"
	bash scripts/check-static.sh "$out/sandcheck-probe_${version}_linux_$arch" || die "the $arch probe is not static"
	bash scripts/check-static.sh "$out/sandcheck_${version}_linux_$arch" || die "the $arch CLI is not static"
	[[ $arch == "$host_arch" ]] && sc=$out/sandcheck_${version}_linux_$arch
done
if [[ -z $sc ]]; then
	sc=$(mktemp -d)/sandcheck
	go build -o "$sc" ./cmd/sandcheck
fi
"$sc" version | grep -q "^sandcheck $version " || die "the built CLI does not report version $version"

if [[ ${IMAGE:-1} == 1 ]]; then
	[[ $host_arch == amd64 ]] || die "the tool image is built for linux/amd64 only (IMAGE=0 to skip)"
	tag=sandcheck:$version
	say "building the tool image $tag"
	VERSION=$version bash scripts/build-sandcheck-image.sh "$tag" >/dev/null
	docker save -o "$out/sandcheck-image_${version}_linux_amd64.tar" "$tag"
	if [[ -n ${PUSH:-} ]]; then
		ref=$("$sc" image push "$tag" "$PUSH:$version")
		"$sc" image sign "$ref" --key "$KEY" --attest-sbom -a "org.opencontainers.image.version=$version"
		say "pushed, signed and attested $ref"
	fi
fi

cd "$out"
for f in *; do
	[[ -f $f && $f != *.spdx.json ]] || continue
	say "cataloging $f"
	"$sc" image sbom "file:$f" -o "$f.spdx.json" 2>/dev/null
done
sha256sum -- * >SHA256SUMS
"$sc" report sign "$out" --key "$KEY" >/dev/null
say "signed $(wc -l <SHA256SUMS) files in $out (verify: sandcheck report verify $out --key cosign.pub)"
