// Package hostmounts reads this process's mount table.
package hostmounts

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
)

// Mount is one line of the mount table.
type Mount struct {
	Target   string
	FSType   string
	ReadOnly bool
}

// List reads /proc/self/mountinfo, in mount order.
func List() ([]Mount, error) {
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return nil, fmt.Errorf("reading mountinfo: %w", err)
	}
	return Parse(b), nil
}

// Bounds of another process's mount table (OfPID).
const (
	maxTableBytes = 4 << 20
	maxTableLines = 8192
)

// OfPID reads the mount table of process pid (its mount namespace), at
// most 4 MiB and 8,192 lines: a table past either is an error, never read
// in part.
func OfPID(pid int) ([]Mount, error) {
	p := fmt.Sprintf("/proc/%d/mountinfo", pid)
	f, err := os.Open(p)
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", p, err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxTableBytes+1))
	switch {
	case err != nil:
		return nil, fmt.Errorf("reading %s: %w", p, err)
	case len(b) > maxTableBytes:
		return nil, fmt.Errorf("reading %s: over %d bytes", p, maxTableBytes)
	case bytes.Count(b, []byte("\n")) > maxTableLines:
		return nil, fmt.Errorf("reading %s: over %d lines", p, maxTableLines)
	}
	return Parse(b), nil
}

// Parse reads mountinfo lines; a malformed line is skipped. A mount is
// read-only when its own options or its superblock's say ro.
func Parse(b []byte) []Mount {
	var out []Mount
	for _, line := range strings.Split(string(b), "\n") {
		// id parent major:minor root target options [optional...] - fstype source super-options
		f := strings.Fields(line)
		sep := slices.Index(f, "-")
		if len(f) < 6 || sep < 6 || sep+1 >= len(f) {
			continue
		}
		ro := slices.Contains(strings.Split(f[5], ","), "ro")
		if sep+3 < len(f) {
			ro = ro || slices.Contains(strings.Split(f[sep+3], ","), "ro")
		}
		out = append(out, Mount{Target: unescape(f[4]), FSType: f[sep+1], ReadOnly: ro})
	}
	return out
}

// Under lists the mount points at dir or below it, the last mounted first
// (the order to unmount them in).
func Under(dir string) ([]string, error) {
	ms, err := List()
	if err != nil {
		return nil, err
	}
	var out []string
	for _, m := range ms {
		if m.Target == dir || strings.HasPrefix(m.Target, dir+"/") {
			out = append(out, m.Target)
		}
	}
	slices.Reverse(out)
	return out, nil
}

// unescape undoes mountinfo's octal escapes of blanks and backslashes.
func unescape(s string) string {
	return strings.NewReplacer(`\040`, " ", `\011`, "\t", `\012`, "\n", `\134`, `\`).Replace(s)
}
