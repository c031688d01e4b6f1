// Package hostmounts reads this process's mount table.
package hostmounts

import (
	"fmt"
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
	var out []Mount
	for _, line := range strings.Split(string(b), "\n") {
		// id parent major:minor root target options [optional...] - fstype source super-options
		f := strings.Fields(line)
		sep := slices.Index(f, "-")
		if len(f) < 6 || sep < 6 || sep+1 >= len(f) {
			continue
		}
		out = append(out, Mount{Target: unescape(f[4]), FSType: f[sep+1], ReadOnly: slices.Contains(strings.Split(f[5], ","), "ro")})
	}
	return out, nil
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
