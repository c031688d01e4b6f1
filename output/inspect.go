package output

import (
	"archive/zip"
	"bytes"
	"compress/flate"
	"compress/gzip"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"path"
	"regexp"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/sandcheck/sandcheck/internal/secretshape"
)

// escapeName renders a name from inside the sandbox for records: printable
// UTF-8 stays as is, anything else is escaped the way Go quotes strings.
func escapeName(s string) string {
	if utf8.ValidString(s) && !hasControl(s) {
		return s
	}
	q := strconv.Quote(s)
	return q[1 : len(q)-1]
}

func hasControl(s string) bool {
	for _, r := range s {
		if r < 0x20 || r == 0x7f || r == utf8.RuneError {
			return true
		}
	}
	return !utf8.ValidString(s)
}

// checkName flags a hostile name and returns the clean relative path the
// entry may be released under; ok is false when the name is hostile.
func checkName(a *Artifact, name string) (clean string, ok bool) {
	ok = true
	if hasControl(name) {
		a.flag(FlagControlName)
		ok = false
	}
	if strings.HasPrefix(name, "/") || strings.HasPrefix(name, `\`) {
		a.flag(FlagAbsoluteName)
		ok = false
	}
	for _, el := range strings.FieldsFunc(name, func(r rune) bool { return r == '/' || r == '\\' }) {
		if el == ".." {
			a.flag(FlagTraversalName)
			ok = false
		}
	}
	clean = path.Clean(strings.TrimPrefix(name, "./"))
	if clean == "." || clean == "" || strings.HasPrefix(clean, "../") || clean == ".." || path.IsAbs(clean) {
		ok = false
	}
	return clean, ok
}

// linkOutside reports whether a link named name with target points outside
// the output folder: absolute targets always do (they resolve against
// whatever root reads them), relative ones when they climb above it.
func linkOutside(name, target string) bool {
	if target == "" || strings.HasPrefix(target, "/") || strings.HasPrefix(target, `\`) {
		return true
	}
	t := path.Clean(path.Join(path.Dir(strings.TrimPrefix(name, "./")), strings.ReplaceAll(target, `\`, "/")))
	return t == ".." || strings.HasPrefix(t, "../") || path.IsAbs(t)
}

// eicar is the EICAR anti-virus test string, assembled at run time so this
// source and the binaries built from it do not carry it whole.
func eicar() []byte {
	return []byte(`X5O!P%@AP[4\PZX54(P^)7CC)7}$` + "EICAR-STANDARD-ANTIVIRUS" + `-TEST-FILE!$H+H*`)
}

// EICAR returns the EICAR test string (for probes and tests that plant it).
func EICAR() []byte { return eicar() }

var activePattern = regexp.MustCompile(`(?i)<script[\s>/]|\son[a-z]{3,20}\s*=|javascript:`)

// detectType names the content type: magic numbers for the kinds the gate
// cares about, then the standard sniffer.
func detectType(b []byte) string {
	switch {
	case bytes.HasPrefix(b, []byte{0x1f, 0x8b}):
		return "application/gzip"
	case bytes.HasPrefix(b, []byte("PK\x03\x04")), bytes.HasPrefix(b, []byte("PK\x05\x06")):
		return "application/zip"
	case len(b) >= 262 && string(b[257:262]) == "ustar":
		return "application/x-tar"
	case bytes.HasPrefix(b, []byte("\x7fELF")):
		return "application/x-elf"
	case bytes.HasPrefix(b, []byte("MZ")):
		return "application/vnd.microsoft.portable-executable"
	case bytes.HasPrefix(b, []byte("#!")):
		return "text/x-shellscript"
	}
	head := b[:min(len(b), 1024)]
	if bytes.Contains(bytes.ToLower(head), []byte("<svg")) {
		return "image/svg+xml"
	}
	return http.DetectContentType(b)
}

// inspect fills in digest, type and content flags of a file whose first
// bytes are b; complete says b is the whole file.
func inspect(a *Artifact, b []byte, complete bool, lim Limits) {
	sum := sha256.Sum256(b)
	a.SHA256 = "sha256:" + hex.EncodeToString(sum[:])
	a.Read = int64(len(b))
	a.Type = detectType(b)
	if bytes.Contains(b, eicar()) {
		a.flag(FlagEICAR)
	}
	for _, s := range secretshape.Find(b) {
		a.flag(FlagSecret)
		a.Findings = append(a.Findings, "secret:"+s)
	}
	switch {
	case a.Type == "application/x-elf" || a.Type == "application/vnd.microsoft.portable-executable":
		a.flag(FlagExecutable)
	case strings.HasPrefix(a.Type, "text/html") || a.Type == "image/svg+xml" || strings.HasPrefix(a.Type, "text/xml"):
		if activePattern.Match(b) {
			a.flag(FlagActiveContent)
		}
	case a.Type == "application/gzip":
		if why := gzipBomb(b, complete, lim); why != "" {
			a.flag(FlagArchiveBomb)
			a.Findings = append(a.Findings, why)
		}
	case a.Type == "application/zip":
		if why := zipBomb(b, lim); why != "" {
			a.flag(FlagArchiveBomb)
			a.Findings = append(a.Findings, why)
		}
	}
}

// expands decompresses r up to max+1 bytes and returns how many came out.
func expands(r io.Reader, max int64) int64 {
	n, _ := io.Copy(io.Discard, io.LimitReader(r, max+1))
	return n
}

// bombRatio says whether out bytes from in compressed bytes is a bomb.
func bombRatio(in, out int64, lim Limits) bool {
	return out >= MinBombBytes && in > 0 && out/in > lim.MaxRatio
}

// gzipBomb inspects a gzip stream without decompressing past the bound:
// the declared size (the trailer, when the whole file is there) and a
// bounded sample.
func gzipBomb(b []byte, complete bool, lim Limits) string {
	if complete && len(b) >= 18 {
		if declared := int64(binary.LittleEndian.Uint32(b[len(b)-4:])); declared > lim.MaxExpandBytes {
			return fmt.Sprintf("gzip declares %d bytes decompressed (bound %d)", declared, lim.MaxExpandBytes)
		}
	}
	zr, err := gzip.NewReader(bytes.NewReader(b))
	if err != nil {
		return ""
	}
	n := expands(zr, lim.MaxExpandBytes)
	switch {
	case n > lim.MaxExpandBytes:
		return fmt.Sprintf("gzip expands past %d bytes from %d", lim.MaxExpandBytes, len(b))
	case bombRatio(int64(len(b)), n, lim):
		return fmt.Sprintf("gzip expands %d bytes to %d (ratio %d, bound %d)", len(b), n, n/int64(len(b)), lim.MaxRatio)
	}
	return ""
}

// maxZipEntries bounds how many entries of one zip the gate looks at.
const maxZipEntries = 1024

// zipBomb inspects a zip's central directory (declared sizes) and a bounded
// sample of its entries.
func zipBomb(b []byte, lim Limits) string {
	zr, err := zip.NewReader(bytes.NewReader(b), int64(len(b)))
	if err != nil {
		// Cut short (oversize) or malformed: the first local header still
		// declares a size and starts a stream that can be sampled.
		return zipLocalBomb(b, lim)
	}
	if len(zr.File) > maxZipEntries {
		return fmt.Sprintf("zip holds %d entries (bound %d)", len(zr.File), maxZipEntries)
	}
	var declared uint64
	for _, f := range zr.File {
		declared += f.UncompressedSize64
		if declared > uint64(lim.MaxExpandBytes) {
			return fmt.Sprintf("zip declares more than %d bytes decompressed", lim.MaxExpandBytes)
		}
	}
	var out int64
	for _, f := range zr.File {
		rc, err := f.Open()
		if err != nil {
			continue
		}
		out += expands(rc, lim.MaxExpandBytes-out)
		rc.Close()
		if out > lim.MaxExpandBytes {
			return fmt.Sprintf("zip expands past %d bytes from %d", lim.MaxExpandBytes, len(b))
		}
	}
	if bombRatio(int64(len(b)), out, lim) {
		return fmt.Sprintf("zip expands %d bytes to %d (ratio %d, bound %d)", len(b), out, out/int64(len(b)), lim.MaxRatio)
	}
	return ""
}

// zipLocalBomb reads the first local file header of a zip whose central
// directory is missing: its declared size, then a bounded sample.
func zipLocalBomb(b []byte, lim Limits) string {
	if len(b) < 30 || !bytes.HasPrefix(b, []byte("PK\x03\x04")) {
		return ""
	}
	method := binary.LittleEndian.Uint16(b[8:])
	declared := int64(binary.LittleEndian.Uint32(b[22:]))
	if declared > lim.MaxExpandBytes {
		return fmt.Sprintf("zip entry declares %d bytes decompressed (bound %d)", declared, lim.MaxExpandBytes)
	}
	start := 30 + int(binary.LittleEndian.Uint16(b[26:])) + int(binary.LittleEndian.Uint16(b[28:]))
	if method != zip.Deflate || start >= len(b) {
		return ""
	}
	n := expands(flate.NewReader(bytes.NewReader(b[start:])), lim.MaxExpandBytes)
	switch {
	case n > lim.MaxExpandBytes:
		return fmt.Sprintf("zip entry expands past %d bytes", lim.MaxExpandBytes)
	case bombRatio(int64(len(b)), n, lim):
		return fmt.Sprintf("zip entry expands %d bytes to at least %d (ratio %d, bound %d)", len(b), n, n/int64(len(b)), lim.MaxRatio)
	}
	return ""
}
