package targets

import (
	"path/filepath"
	"strings"
)

// Inputs declares how the platform hands a task its inputs: a host folder it
// fills per task and binds into the sandbox. The harness makes that folder
// per run in the run's own folder and fills it with files carrying per-run
// tokens, so the host can tell what a task read and whether it changed them.
type Inputs struct {
	// Path is the folder inside the sandbox where the task finds its inputs.
	Path string `yaml:"path"`
	// ReadOnly mounts the inputs read-only (as a careful platform does); a
	// writable inputs folder lets a task alter what the platform gave it and
	// leave files in a host folder.
	ReadOnly bool `yaml:"read_only"`
}

func (v *validator) checkInputs(in *Inputs, out *Output) {
	if !filepath.IsAbs(in.Path) || filepath.Clean(in.Path) != in.Path || in.Path == "/" {
		v.add("$.inputs.path", "must be a clean absolute path other than / (got %q)", in.Path)
	}
	if strings.HasPrefix(in.Path, "/.sandcheck") {
		v.add("$.inputs.path", "%s is reserved for the probe binary", in.Path)
	}
	if out != nil && (underPath(in.Path, out.Path) || underPath(out.Path, in.Path)) {
		v.add("$.inputs.path", "%s overlaps the output folder %s", in.Path, out.Path)
	}
}

// checkInputsClash reports a docker mount or tmpfs at or around the inputs.
func (v *validator) checkInputsClash(in *Inputs, d *Docker) {
	for _, m := range d.Mounts {
		if t := filepath.Clean(m.Target); underPath(t, in.Path) || underPath(in.Path, t) {
			v.add("$.inputs.path", "%s overlaps the mount target %s", in.Path, t)
		}
	}
	for _, t := range d.Tmpfs {
		if p := filepath.Clean(t.Path); underPath(p, in.Path) || underPath(in.Path, p) {
			v.add("$.inputs.path", "%s overlaps the tmpfs %s", in.Path, p)
		}
	}
}

// underPath reports whether p is dir or inside it.
func underPath(p, dir string) bool {
	return p == dir || strings.HasPrefix(p, strings.TrimSuffix(dir, "/")+"/")
}
