// Package bounded reads host files whose size the reader does not control
// (procfs and sysfs entries of processes a sandbox may have made, files a
// box could have grown) no further than a bound.
package bounded

import (
	"fmt"
	"io"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
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

// ReadRegular reads at most max+1 bytes of a regular file (one past max
// tells the caller it was longer), refusing a link in its last component
// and anything that is not a regular file (a FIFO, which it never blocks
// on). The folders above are the reader's own or the kernel's (/proc).
func ReadRegular(path string, max int64) ([]byte, error) {
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: path, Err: err}
	}
	f := os.NewFile(uintptr(fd), path)
	defer f.Close()
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%s is no longer a regular file", filepath.Base(path))
	}
	return io.ReadAll(io.LimitReader(f, max+1))
}
