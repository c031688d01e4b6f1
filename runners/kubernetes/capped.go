package kubernetes

import (
	"bytes"
	"slices"
)

// capped keeps the first max bytes written to it and drops the rest, never
// failing the writer (a probe's flood must not stall the stream).
type capped struct {
	buf       bytes.Buffer
	max       int
	truncated bool
}

func (c *capped) Write(p []byte) (int, error) {
	if room := c.max - c.buf.Len(); room < len(p) {
		c.truncated = true
		if room > 0 {
			c.buf.Write(p[:room])
		}
		return len(p), nil
	}
	return c.buf.Write(p)
}

func (c *capped) String() string { return c.buf.String() }

func (c *capped) Bytes() []byte { return bytes.Clone(c.buf.Bytes()) }

func slicesSort(s []string) { slices.Sort(s) }
