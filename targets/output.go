package targets

import (
	"fmt"
	"path/filepath"
	"strings"
)

// Output declares how files a task writes leave the sandbox: the folder the
// task writes them to and the release path that hands them to the host.
type Output struct {
	// Path is the folder inside the sandbox the task writes its output to.
	Path string `yaml:"path"`
	// Release is "bind" (a host folder under the run's folder is mounted
	// writable at Path and released as-is, as careless platforms do) or
	// "gated" (Path is a tmpfs; the harness streams it out and the output
	// gate releases only what it finds clean).
	Release string `yaml:"release"`
	// Size is the tmpfs size of a gated output folder (default 8Mi).
	Size string `yaml:"size,omitempty"`
	// MaxFiles, MaxFileBytes and MaxTotalBytes bound what the release reads:
	// entries, bytes of one file, bytes in all (sizes such as 64Ki).
	MaxFiles      int    `yaml:"max_files,omitempty"`
	MaxFileBytes  string `yaml:"max_file_bytes,omitempty"`
	MaxTotalBytes string `yaml:"max_total_bytes,omitempty"`
}

// MaxGatedStream is the most a gated release may read in all: the stream
// leaves the sandbox through the runner's capped output of one probe run
// (runners.MaxOutput, base64-encoded), so a bigger bound could not be met.
const MaxGatedStream = 128 << 10

// OutputBounds returns the bounds in bytes (0 for one not given).
func (o *Output) OutputBounds() (fileBytes, totalBytes int64) {
	fileBytes, _ = ParseSize(o.MaxFileBytes)
	totalBytes, _ = ParseSize(o.MaxTotalBytes)
	return fileBytes, totalBytes
}

// TmpfsSize is the gated output folder's tmpfs size.
func (o *Output) TmpfsSize() string {
	if o.Size == "" {
		return "8Mi"
	}
	return o.Size
}

func (v *validator) checkOutput(o *Output) {
	if !filepath.IsAbs(o.Path) || filepath.Clean(o.Path) != o.Path || o.Path == "/" {
		v.add("$.output.path", "must be a clean absolute path other than / (got %q)", o.Path)
	}
	if strings.HasPrefix(o.Path, "/.sandcheck") {
		v.add("$.output.path", "%s is reserved for the probe binary", o.Path)
	}
	switch o.Release {
	case "bind", "gated":
	default:
		v.add("$.output.release", "%q is not one of [bind gated]", o.Release)
	}
	if o.MaxFiles < 0 {
		v.add("$.output.max_files", "must not be negative")
	}
	for field, s := range map[string]string{"size": o.Size, "max_file_bytes": o.MaxFileBytes, "max_total_bytes": o.MaxTotalBytes} {
		if s == "" {
			continue
		}
		if _, err := ParseSize(s); err != nil {
			v.add("$.output."+field, "must be a size such as 64Ki (got %q)", s)
		}
	}
	if _, total := o.OutputBounds(); o.Release == "gated" && (total == 0 || total > MaxGatedStream) {
		v.add("$.output.max_total_bytes", "a gated release needs max_total_bytes of at most %d bytes (got %q)", MaxGatedStream, o.MaxTotalBytes)
	}
}

// outputMountClash reports a docker mount or tmpfs already at the output path.
func (v *validator) checkOutputClash(o *Output, d *Docker) {
	for _, m := range d.Mounts {
		if filepath.Clean(m.Target) == o.Path {
			v.add("$.output.path", "%s is already a mount target", o.Path)
		}
	}
	for _, t := range d.Tmpfs {
		if filepath.Clean(t.Path) == o.Path {
			v.add("$.output.path", "%s is already a tmpfs", o.Path)
		}
	}
}

// String describes the declaration in one line.
func (o *Output) String() string {
	return fmt.Sprintf("%s (%s)", o.Path, o.Release)
}
