//go:build linux && amd64

package tracer

import (
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/cilium/ebpf"
)

// ourPrograms lists the loaded BPF programs named like the tracer's (sc_*),
// whoever loaded them.
func ourPrograms(t *testing.T) map[ebpf.ProgramID]string {
	t.Helper()
	names := map[ebpf.ProgramID]string{}
	id := ebpf.ProgramID(0)
	for {
		next, err := ebpf.ProgramGetNextID(id)
		if errors.Is(err, os.ErrNotExist) {
			return names
		}
		if err != nil {
			t.Fatalf("listing BPF programs: %v", err)
		}
		id = next
		p, err := ebpf.NewProgramFromID(id)
		if err != nil {
			continue // gone meanwhile
		}
		info, err := p.Info()
		p.Close()
		if err == nil && strings.HasPrefix(info.Name, "sc_") {
			names[id] = info.Name
		}
	}
}
