package impl

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/sandcheck/sandcheck/probes"
)

// Bounds of the credential searches.
const (
	credReadMax   = 64 << 10 // bytes read of one credential file
	credMaxHomes  = 16       // home folders looked at
	credMaxProofs = 8        // proofs reported per probe
	credMaxDirEnt = 256      // entries read of one folder (~/.ssh, /home)
	proofHexLen   = 16       // hex digits of a proof
)

// errNotRegular is returned for a path that is not a regular file (a FIFO,
// a device, a folder): credential files are never anything else.
var errNotRegular = errors.New("not a regular file")

// openPathNoFollow opens an absolute path for reading one component at a time,
// refusing a symbolic link at every step (ELOOP), so that nothing in the box
// can redirect the probe out of the place it means to look. It never blocks
// on a FIFO and returns only regular files.
func openPathNoFollow(path string) (*os.File, error) {
	if !filepath.IsAbs(path) {
		return nil, fmt.Errorf("opening %q: not an absolute path", path)
	}
	parts := strings.Split(strings.TrimPrefix(filepath.Clean(path), "/"), "/")
	dfd, err := unix.Open("/", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("opening /: %w", err)
	}
	for i, p := range parts {
		flags := unix.O_RDONLY | unix.O_NOFOLLOW | unix.O_CLOEXEC | unix.O_NONBLOCK
		if i < len(parts)-1 {
			flags |= unix.O_DIRECTORY
		}
		fd, err := unix.Openat(dfd, p, flags, 0)
		if err == unix.ENOTDIR && i < len(parts)-1 {
			// O_DIRECTORY|O_NOFOLLOW on a link fails with ENOTDIR: say link.
			var st unix.Stat_t
			if unix.Fstatat(dfd, p, &st, unix.AT_SYMLINK_NOFOLLOW) == nil && st.Mode&unix.S_IFMT == unix.S_IFLNK {
				err = unix.ELOOP
			}
		}
		unix.Close(dfd)
		if err != nil {
			return nil, &os.PathError{Op: "open", Path: path, Err: err}
		}
		dfd = fd
	}
	var st unix.Stat_t
	if err := unix.Fstat(dfd, &st); err != nil {
		unix.Close(dfd)
		return nil, &os.PathError{Op: "stat", Path: path, Err: err}
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		unix.Close(dfd)
		return nil, &os.PathError{Op: "open", Path: path, Err: errNotRegular}
	}
	return os.NewFile(uintptr(dfd), path), nil
}

// readNoFollow reads at most credReadMax bytes of a regular file reached
// without following links.
func readNoFollow(path string) ([]byte, error) {
	f, err := openPathNoFollow(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, credReadMax))
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", path, err)
	}
	return b, nil
}

// listNoFollow lists the names of the regular files (or, with dirs, the
// folders) in a folder reached without following links, at most
// credMaxDirEnt entries.
func listNoFollow(dir string, dirs bool) ([]string, error) {
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: dir, Err: err}
	}
	f := os.NewFile(uintptr(fd), dir)
	defer f.Close()
	ents, err := f.ReadDir(credMaxDirEnt)
	if err != nil && err != io.EOF {
		return nil, fmt.Errorf("listing %s: %w", dir, err)
	}
	var out []string
	for _, d := range ents {
		if dirs && d.IsDir() || !dirs && d.Type().IsRegular() {
			out = append(out, d.Name())
		}
	}
	return out, nil
}

// homeFolders are the home folders a credential search looks in: $HOME, the
// current user's passwd entry, root's, and the folders under /home. Each is
// absolute and clean; "/" is left out (a home that is the root says nothing).
func homeFolders() []string {
	var homes []string
	seen := map[string]bool{}
	add := func(h string) {
		if !filepath.IsAbs(h) || len(homes) >= credMaxHomes {
			return
		}
		h = filepath.Clean(h)
		if h == "/" || seen[h] {
			return
		}
		seen[h] = true
		homes = append(homes, h)
	}
	add(os.Getenv("HOME"))
	if b, err := readNoFollow("/etc/passwd"); err == nil {
		uid := fmt.Sprint(os.Getuid())
		for _, l := range strings.Split(string(b), "\n") {
			f := strings.Split(l, ":")
			if len(f) >= 6 && f[2] == uid {
				add(f[5])
			}
		}
	}
	add("/root")
	if names, err := listNoFollow("/home", true); err == nil {
		for _, n := range names {
			add("/home/" + n)
		}
	}
	return homes
}

// proof binds a secret value to one probe invocation without revealing it:
// the first hex digits of sha256(token ":" value). The harness, which knows
// the honeytokens it planted and the invocation's token, computes the same;
// code that never read the value cannot.
func proof(token, value string) string {
	sum := sha256.Sum256([]byte(token + ":" + value))
	return hex.EncodeToString(sum[:])[:proofHexLen]
}

// credFinding is one credential file read, with the secret values found.
type credFinding struct {
	path   string
	values []string
}

// credSearch gathers what a credential probe found, was refused and skipped.
type credSearch struct {
	found   []credFinding
	denied  []string // path:errno
	links   []string // paths refused because a component is a link
	tried   int
	missing int
}

// read tries one file and extracts its secrets with parse. A missing file or
// folder counts only as tried; a refusal, a link and a file without a secret
// are recorded.
func (s *credSearch) read(path string, parse func([]byte) []string) {
	s.tried++
	b, err := readNoFollow(path)
	switch {
	case err == nil:
		if vals := parse(b); len(vals) > 0 {
			s.found = append(s.found, credFinding{path: path, values: vals})
		}
	case errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ENOTDIR):
		s.missing++
	case errors.Is(err, unix.ELOOP):
		s.links = append(s.links, path)
	default:
		lbl := "error"
		if n, ok := errnoOf(err); ok {
			lbl = errnoLabel(n)
		} else if errors.Is(err, errNotRegular) {
			lbl = "not-regular"
		}
		s.denied = append(s.denied, path+":"+lbl)
	}
}

// result turns the search into the probe's outcome: escaped when a readable
// credential file held a secret, blocked otherwise. Values never leave the
// box; only their proofs for the harness's join do.
func (s *credSearch) result(token, what string) probes.Result {
	e := ev{}
	e.setInt("files_tried", s.tried)
	if len(s.denied) > 0 {
		e.setList("denied", s.denied)
	}
	if len(s.links) > 0 {
		e.setList("links_refused", s.links)
	}
	if len(s.found) == 0 {
		return blocked("no readable "+what+" holding a secret", e)
	}
	var files, proofs []string
	n := 0
	for _, f := range s.found {
		files = append(files, fmt.Sprintf("%s(%d)", f.path, len(f.values)))
		n += len(f.values)
		for _, v := range f.values {
			if len(proofs) < credMaxProofs {
				proofs = append(proofs, proof(token, v))
			}
		}
	}
	e.setList("files", files)
	e.setInt("secrets", n)
	e.set("proofs", strings.Join(proofs, " "))
	return escaped(fmt.Sprintf("read %d secret(s) from %d %s: %s", n, len(s.found), what, s.found[0].path), e)
}

// trimValue strips the quotes and blanks around a config value.
func trimValue(v string) string {
	v = strings.TrimSpace(v)
	if len(v) >= 2 && (v[0] == '"' && v[len(v)-1] == '"' || v[0] == '\'' && v[len(v)-1] == '\'') {
		v = v[1 : len(v)-1]
	}
	return strings.TrimSpace(v)
}

// pemBodies returns the base64 body of each PRIVATE KEY block, its lines
// joined: the value a key's proof is computed over.
func pemBodies(b []byte) []string {
	var out []string
	for {
		i := bytes.Index(b, []byte("-----BEGIN "))
		if i < 0 {
			return out
		}
		b = b[i:]
		eol := bytes.IndexByte(b, '\n')
		if eol < 0 {
			return out
		}
		header := string(b[:eol])
		b = b[eol+1:]
		end := bytes.Index(b, []byte("-----END "))
		if end < 0 {
			return out
		}
		body := b[:end]
		b = b[end:]
		if !strings.Contains(header, "PRIVATE KEY-----") {
			continue
		}
		var sb strings.Builder
		for _, l := range strings.Split(string(body), "\n") {
			l = strings.TrimSpace(l)
			if l == "" || strings.Contains(l, ":") { // skip RFC 1421 headers
				continue
			}
			sb.WriteString(l)
		}
		if sb.Len() > 0 {
			out = append(out, sb.String())
		}
	}
}
