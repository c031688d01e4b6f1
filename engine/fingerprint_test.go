package engine

import "testing"

// The kernel comparison decides "shared" only from the host's own release
// and version; either field of fingerprint.runtime's "kernel" works.
func TestKernelComparison(t *testing.T) {
	for _, c := range []struct {
		fields map[string]string
		shared string
	}{
		{map[string]string{"kernel_release": "6.1.0-1", "kernel_version": "#1 SMP Debian"}, "true"},
		{map[string]string{"kernel": "6.1.0-1 #1 SMP Debian"}, "true"},
		{map[string]string{"kernel_release": "4.4.0", "kernel_version": "#1 SMP Sun Jan 10 15:06:54 PST 2016"}, "false"},
		{map[string]string{"kernel_release": "6.1.0-1", "kernel_version": "#2 other build"}, "false"},
		{map[string]string{}, ""},
	} {
		it, ok := kernelComparison(c.fields, "6.1.0-1", "#1 SMP Debian")
		if !ok || it.Data["shared"] != c.shared || it.Indicates != "" {
			t.Errorf("%v: %+v", c.fields, it)
		}
	}
}
