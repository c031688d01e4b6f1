// Package hostmounts reads this process's mount table.
package hostmounts

import (
	"fmt"
	"os"
	"slices"
	"strings"
)

// Under lists the mount points at dir or below it, from
// /proc/self/mountinfo, the last mounted first (the order to unmount them
// in).
func Under(dir string) ([]string, error) {
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return nil, fmt.Errorf("reading mountinfo: %w", err)
	}
	var out []string
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) < 5 {
			continue
		}
		if mp := unescape(f[4]); mp == dir || strings.HasPrefix(mp, dir+"/") {
			out = append(out, mp)
		}
	}
	slices.Reverse(out)
	return out, nil
}

// unescape undoes mountinfo's octal escapes of blanks and backslashes.
func unescape(s string) string {
	return strings.NewReplacer(`\040`, " ", `\011`, "\t", `\012`, "\n", `\134`, `\`).Replace(s)
}
