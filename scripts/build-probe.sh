#!/usr/bin/env bash
# build-probe.sh OUT [ARCH]: builds the static probe binary
# (cmd/sandcheck-probe) for linux/ARCH (amd64, the default, or arm64),
# reproducibly: no cgo, no VCS stamp, trimmed paths, stripped, a fixed
# GOAMD64 level. `make build`, `make probe-embed` and `make release` use it,
# and the probebin drift test rebuilds with it, so the copy embedded in the
# CLI is byte for byte the probe these sources make.
set -euo pipefail

out=${1:?usage: build-probe.sh OUT [amd64|arm64]}
arch=${2:-amd64}
case $arch in
amd64 | arm64) ;;
*)
	echo "build-probe.sh: unsupported architecture $arch (amd64 or arm64)" >&2
	exit 2
	;;
esac
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
CGO_ENABLED=0 GOOS=linux GOARCH=$arch GOAMD64=v1 \
	go build -trimpath -buildvcs=false -ldflags "-s -w" -o "$out" ./cmd/sandcheck-probe
