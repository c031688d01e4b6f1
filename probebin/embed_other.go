//go:build !(linux && (amd64 || arm64))

package probebin

// probeGz is empty where no probe is embedded: Binary and Path return
// ErrNone.
var probeGz []byte
