// Package output is the harness's output gate: the one place where files
// made inside a sandbox reach the host. It reads a tar stream that came out
// of a sandbox, or walks a folder a sandbox wrote, and treats every byte as
// hostile: it never follows a link, never writes outside its destination,
// bounds the count of entries, the bytes of each file and the bytes in all,
// and records each artifact's path, size, sha256 digest, detected type and
// flags (links, special files, hostile names, oversize, archive bombs,
// secret-shaped content, the EICAR test string, active content).
//
// A gated release (ReadTar) writes only unflagged regular files into its
// destination and withholds the rest; an inspection (Walk) writes nothing and
// only reports what a folder released as-is holds.
package output

import (
	"errors"
	"fmt"
)

// Release modes a target may declare.
const (
	// ModeBind: a host folder bind-mounted writable into the sandbox and
	// released as-is (what a careless platform does).
	ModeBind = "bind"
	// ModeGated: the harness copies the folder out as a stream through the
	// gate, which releases only what it found clean.
	ModeGated = "gated"
)

// Artifact kinds.
const (
	KindFile     = "file"
	KindDir      = "dir"
	KindSymlink  = "symlink"
	KindHardlink = "hardlink"
	KindFifo     = "fifo"
	KindChar     = "char-device"
	KindBlock    = "block-device"
	KindSocket   = "socket"
	KindOther    = "other"
)

// Flags the gate puts on an artifact. Any flag withholds it from a gated
// release.
const (
	FlagSymlink        = "symlink"         // a symbolic link, whatever it points at
	FlagSymlinkOutside = "symlink-outside" // ... pointing outside the output folder
	FlagHardlink       = "hardlink"        // a hard link (to a file the release may not hold)
	FlagSpecial        = "special-file"    // fifo, device or socket
	FlagAbsoluteName   = "absolute-name"   // a name starting with /
	FlagTraversalName  = "traversal-name"  // a name with a .. element (/ or \ separated)
	FlagControlName    = "control-name"    // a name with NUL or control characters
	FlagDuplicateName  = "duplicate-name"  // a name seen before in the same stream
	FlagOversize       = "oversize"        // bigger than the per-file bound
	FlagOverTotal      = "over-total"      // past the bound of bytes in all
	FlagArchiveBomb    = "archive-bomb"    // gzip/zip expanding past the bound or ratio
	FlagSecret         = "secret"          // secret-shaped content
	FlagEICAR          = "eicar"           // the EICAR anti-virus test string
	FlagActiveContent  = "active-content"  // HTML or SVG with script
	FlagExecutable     = "executable"      // ELF or PE executable
	FlagUnreadable     = "unreadable"      // the gate could not read it safely
)

// Limits bound what the gate reads.
type Limits struct {
	// MaxFiles is the most entries (of any kind) read; the rest are not.
	MaxFiles int `json:"max_files"`
	// MaxFileBytes is the most content kept of one file; a bigger file is
	// flagged oversize and its digest covers only what was read.
	MaxFileBytes int64 `json:"max_file_bytes"`
	// MaxTotalBytes is the most content read in all.
	MaxTotalBytes int64 `json:"max_total_bytes"`
	// MaxExpandBytes is how far an archive is decompressed, in a sample,
	// before it counts as a bomb.
	MaxExpandBytes int64 `json:"max_expand_bytes"`
	// MaxRatio is the expansion ratio past which a compressed artifact of
	// at least MinBombBytes decompressed counts as a bomb.
	MaxRatio int64 `json:"max_ratio"`
}

// MinBombBytes is the decompressed size below which a high ratio alone does
// not make a bomb (a small run of zeros compresses well and harms nobody).
const MinBombBytes = 1 << 20

// DefaultLimits are what a target that names no bounds gets.
var DefaultLimits = Limits{MaxFiles: 256, MaxFileBytes: 1 << 20, MaxTotalBytes: 8 << 20, MaxExpandBytes: 64 << 20, MaxRatio: 100}

// withDefaults fills zero fields from DefaultLimits.
func (l Limits) withDefaults() Limits {
	d := DefaultLimits
	if l.MaxFiles > 0 {
		d.MaxFiles = l.MaxFiles
	}
	if l.MaxFileBytes > 0 {
		d.MaxFileBytes = l.MaxFileBytes
	}
	if l.MaxTotalBytes > 0 {
		d.MaxTotalBytes = l.MaxTotalBytes
	}
	if l.MaxExpandBytes > 0 {
		d.MaxExpandBytes = l.MaxExpandBytes
	}
	if l.MaxRatio > 0 {
		d.MaxRatio = l.MaxRatio
	}
	return d
}

// Artifact is one entry the gate saw.
type Artifact struct {
	// Path is the entry's name as the sandbox gave it, relative to the
	// output folder, with control characters escaped (Go %q style).
	Path string `json:"path"`
	Kind string `json:"kind"`
	// Size is the size the entry declared (tar header or lstat).
	Size int64 `json:"size"`
	// Read is how many content bytes the gate read; SHA256 covers those.
	Read   int64  `json:"read,omitempty"`
	SHA256 string `json:"sha256,omitempty"`
	// Type is the detected content type (magic numbers first, then
	// http.DetectContentType).
	Type string `json:"type,omitempty"`
	// LinkTarget is a link's target, escaped like Path.
	LinkTarget string   `json:"link_target,omitempty"`
	Flags      []string `json:"flags,omitempty"`
	// Findings name what a content flag matched (secret shapes, the bomb's
	// figures); never the secret itself.
	Findings []string `json:"findings,omitempty"`
	// Released says the gate wrote it into the release folder (gated) or
	// that it sits in the released folder as-is (bind).
	Released bool `json:"released"`
}

// Flagged reports whether the artifact carries flag f.
func (a Artifact) Flagged(f string) bool {
	for _, g := range a.Flags {
		if g == f {
			return true
		}
	}
	return false
}

func (a *Artifact) flag(f string) {
	if !a.Flagged(f) {
		a.Flags = append(a.Flags, f)
	}
}

// Release is what one pass of the gate saw and did.
type Release struct {
	Mode string `json:"mode"`
	// Source is "tar-stream" (gated) or "folder" (bind).
	Source string `json:"source"`
	// Dest is the host folder holding the released files.
	Dest      string     `json:"dest,omitempty"`
	Limits    Limits     `json:"limits"`
	Artifacts []Artifact `json:"artifacts"`
	// Truncated says the gate stopped at a bound before the end.
	Truncated bool `json:"truncated,omitempty"`
	// Entries and Bytes count what was read.
	Entries int   `json:"entries"`
	Bytes   int64 `json:"bytes"`
	// Error says why the stream or walk ended early (a malformed tar, an
	// unreadable folder); what was read before stays.
	Error string `json:"error,omitempty"`
}

// ErrBound marks a pass stopped at one of its bounds.
var ErrBound = errors.New("output bound reached")

func (r *Release) fail(err error) {
	if errors.Is(err, ErrBound) {
		r.Truncated = true
	}
	if r.Error == "" {
		r.Error = err.Error()
	}
}

// Summary is a one-line account of the release.
func (r *Release) Summary() string {
	released, withheld := 0, 0
	for _, a := range r.Artifacts {
		if a.Released {
			released++
		} else {
			withheld++
		}
	}
	s := fmt.Sprintf("%s release (%s): %d entries, %d bytes read, %d released, %d withheld", r.Mode, r.Source, r.Entries, r.Bytes, released, withheld)
	if r.Truncated {
		s += ", stopped at a bound"
	}
	if r.Error != "" {
		s += ": " + r.Error
	}
	return s
}
