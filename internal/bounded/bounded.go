// Package bounded reads host files whose size the reader does not control
// (procfs and sysfs entries of processes a sandbox may have made, files a
// box could have grown) no further than a bound.
package bounded

import (
	"io"
	"os"
)

// ReadFile returns at most n bytes of the file at path; nil when it cannot
// be opened. A read error keeps what was read before it.
func ReadFile(path string, n int64) []byte {
	f, err := os.Open(path)
	if err != nil {
		return nil
	}
	defer f.Close()
	b, _ := io.ReadAll(io.LimitReader(f, n))
	return b
}
