package impl

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/sandcheck/sandcheck/probes"
)

// Bounds of the scoped-key search.
const (
	scopedMaxFiles  = 256
	scopedMinToken  = 16
	scopedMaxToken  = 512
	scopedMaxPlaces = 8
)

func init() {
	register(map[string]Func{"secrets.scoped-key": scopedKey})
}

// scopedKey looks for the platform's scoped key everywhere code in the box
// would: the environment, the environment and command lines of process 1 and
// itself, and the files in the usual places (home folders and their .config,
// /etc, /run/secrets, /workspace, /tmp). The harness hands it only the key's
// SHA-256, so the probe recognises the key without being given it; a find
// is reported with a proof bound to the invocation's token.
func scopedKey(ctx context.Context, p probes.Params) probes.Result {
	want, err := hex.DecodeString(p.ScopedKeySHA256)
	e := ev{}
	if err != nil || len(want) != sha256.Size {
		return inconclusive("the harness named no scoped key to look for (--scoped-key-sha256)", e)
	}
	sk := &scopedSearch{want: string(want)}
	for _, kv := range os.Environ() {
		name, val, _ := strings.Cut(kv, "=")
		sk.look("env:"+clip(name, 64), val)
	}
	procs := []string{"/proc/self/environ", "/proc/self/cmdline"}
	// Process 1 of the box, unless the PID namespace is the host's.
	if own, err := os.Readlink("/proc/self/ns/mnt"); err == nil {
		if one, err := os.Readlink("/proc/1/ns/mnt"); err == nil && one == own {
			procs = append(procs, "/proc/1/environ", "/proc/1/cmdline")
		}
	}
	for _, f := range procs {
		if b, err := readProcFile(f); err == nil {
			sk.look(f, string(b))
		}
	}
	var dirs []string
	for _, h := range homeFolders() {
		dirs = append(dirs, h, filepath.Join(h, ".config"))
	}
	dirs = append(dirs, "/etc", "/run/secrets", "/var/run/secrets", "/workspace", "/tmp")
	for _, d := range dirs {
		names, err := listNoFollow(d, false)
		if err != nil {
			continue
		}
		for _, n := range names {
			if ctx.Err() != nil || sk.files >= scopedMaxFiles {
				break
			}
			sk.files++
			if b, err := readNoFollow(filepath.Join(d, n)); err == nil {
				sk.look(filepath.Join(d, n), string(b))
			}
		}
	}
	e.setInt("files_read", sk.files)
	if len(sk.places) == 0 {
		return blocked("the platform's scoped key is nowhere in the box's environment, /proc or usual files", e)
	}
	e.setList("places", sk.places)
	e.set("proofs", proof(p.Token, sk.value))
	return escaped(fmt.Sprintf("found the platform's scoped key in %d place(s): %s", len(sk.places), sk.places[0]), e)
}

type scopedSearch struct {
	want   string // the key's SHA-256, raw
	value  string
	places []string
	files  int
}

// look checks a whole value and each token in it (runs of [A-Za-z0-9_-],
// the alphabet of API keys) against the key's hash.
func (s *scopedSearch) look(where, text string) {
	match := func(c string) bool {
		if len(c) < scopedMinToken || len(c) > scopedMaxToken {
			return false
		}
		sum := sha256.Sum256([]byte(c))
		return string(sum[:]) == s.want
	}
	hit := ""
	if match(strings.TrimSpace(text)) {
		hit = strings.TrimSpace(text)
	} else {
		for _, tok := range strings.FieldsFunc(text, func(r rune) bool {
			return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '-')
		}) {
			if match(tok) {
				hit = tok
				break
			}
		}
	}
	if hit != "" {
		s.value = hit
		if len(s.places) < scopedMaxPlaces {
			s.places = append(s.places, where)
		}
	}
}
