#!/usr/bin/env bash
# build-probe.sh OUT: builds the static probe binary (cmd/sandcheck-probe) for
# linux/amd64, reproducibly: no cgo, no VCS stamp, trimmed paths, stripped, a
# fixed GOAMD64 level. `make build` and `make probe-embed` use it, and the
# probebin drift test rebuilds with it, so the copy embedded in the CLI is
# byte for byte the probe these sources make.
set -euo pipefail

out=${1:?usage: build-probe.sh OUT}
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
CGO_ENABLED=0 GOOS=linux GOARCH=amd64 GOAMD64=v1 \
	go build -trimpath -buildvcs=false -ldflags "-s -w" -o "$out" ./cmd/sandcheck-probe
