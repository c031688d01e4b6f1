//go:build linux && amd64

package probebin

import _ "embed"

// probeGz is scripts/build-probe.sh's output, gzipped (make probe-embed).
//
//go:embed sandcheck-probe.linux-amd64.gz
var probeGz []byte
