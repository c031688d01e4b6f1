package output

import (
	"bytes"
	"encoding/base64"
	"errors"
	"fmt"
)

// The frame around a tar stream that a probe run writes, base64-encoded, on
// its standard error after its results. Everything in it is hostile: the
// frame only says where the gate should start reading.
const (
	FrameBegin = "--- sandcheck output tar (base64) ---"
	FrameEnd   = "--- end of sandcheck output tar ---"
)

// MaxPackBytes bounds the raw tar a probe run packs, so that its base64 form
// and the frame fit in the runner's capped standard error
// (runners.MaxOutput, 256 KiB).
const MaxPackBytes = 180 << 10

// ErrNoFrame means the output carried no complete frame.
var ErrNoFrame = errors.New("no output stream in the probe's output")

// Unframe returns the tar stream framed in out (the last complete frame).
func Unframe(out []byte) ([]byte, error) {
	i := bytes.LastIndex(out, []byte(FrameBegin+"\n"))
	if i < 0 {
		return nil, ErrNoFrame
	}
	body := out[i+len(FrameBegin)+1:]
	j := bytes.Index(body, []byte("\n"+FrameEnd))
	if j < 0 {
		return nil, fmt.Errorf("%w: the frame is not closed", ErrNoFrame)
	}
	enc := bytes.TrimSpace(body[:j])
	// Lines of 76 characters each cost one newline.
	if base64.StdEncoding.DecodedLen(len(enc)*76/77) > MaxPackBytes+64 {
		return nil, fmt.Errorf("the framed stream is bigger than %d bytes", MaxPackBytes)
	}
	b := make([]byte, base64.StdEncoding.DecodedLen(len(enc)))
	n, err := base64.StdEncoding.Decode(b, enc)
	if err != nil {
		return nil, fmt.Errorf("decoding the framed stream: %w", err)
	}
	return b[:n], nil
}
