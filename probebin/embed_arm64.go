//go:build linux && arm64

package probebin

import _ "embed"

// probeGz is scripts/build-probe.sh's arm64 output, gzipped (make
// probe-embed).
//
//go:embed sandcheck-probe.linux-arm64.gz
var probeGz []byte
