package provenance

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"syscall"

	ita1 "github.com/in-toto/attestation/go/v1"
	"github.com/secure-systems-lab/go-securesystemslib/dsse"
	sigdsse "github.com/sigstore/sigstore/pkg/signature/dsse"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/structpb"
)

// BundleFile is the name of the signed statement inside a run folder.
const BundleFile = "bundle.intoto.json"

// BundlePredicate is the predicate type of a sandcheck evidence bundle.
const BundlePredicate = "https://sandcheck.dev/evidence-bundle/v1"

// intotoPayloadType is the DSSE payload type of in-toto statements.
const intotoPayloadType = "application/vnd.in-toto+json"

// Bounds on what a bundle holds.
const (
	maxBundleFiles    = 10000
	maxBundleEnvelope = 16 << 20
)

// BundleResult is what SignBundle signed or VerifyBundle established.
type BundleResult struct {
	// Path is the signed statement's file.
	Path string `json:"path"`
	// Files maps each file (slash path relative to the folder) to its
	// sha256 digest.
	Files map[string]string `json:"files"`
	// RunID is the run the bundle holds (from run.json; empty if none).
	RunID          string `json:"run_id,omitempty"`
	KeyFingerprint string `json:"key_fingerprint"`
	Tlog           string `json:"tlog"`
}

// SignBundle signs every regular file under dir (run record and verdict,
// evidence stream, SBOM, reports) as the subjects of one in-toto statement,
// in a DSSE envelope signed with s, written to dir/bundle.intoto.json.
func SignBundle(dir string, s *Signer) (*BundleResult, error) {
	files, odd, err := hashTree(dir)
	if err != nil {
		return nil, fmt.Errorf("signing bundle %s: %w", dir, err)
	}
	if len(odd) > 0 {
		return nil, fmt.Errorf("signing bundle %s: %s", dir, strings.Join(odd, "; "))
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("signing bundle %s: the folder holds no files", dir)
	}
	res := &BundleResult{Path: filepath.Join(dir, BundleFile), Files: files, RunID: runID(dir), KeyFingerprint: s.Fingerprint, Tlog: TlogNotRequired}
	pred, err := structpb.NewStruct(map[string]any{
		"run_id":          res.RunID,
		"key_fingerprint": s.Fingerprint,
		"tlog":            TlogNotRequired,
	})
	if err != nil {
		return nil, fmt.Errorf("signing bundle %s: %w", dir, err)
	}
	st := &ita1.Statement{Type: ita1.StatementTypeUri, PredicateType: BundlePredicate, Predicate: pred}
	for _, name := range sortedKeys(files) {
		st.Subject = append(st.Subject, &ita1.ResourceDescriptor{
			Name:   name,
			Digest: map[string]string{"sha256": strings.TrimPrefix(files[name], "sha256:")},
		})
	}
	if err := st.Validate(); err != nil {
		return nil, fmt.Errorf("signing bundle %s: %w", dir, err)
	}
	pl, err := protojson.Marshal(st)
	if err != nil {
		return nil, fmt.Errorf("signing bundle %s: %w", dir, err)
	}
	env, err := sigdsse.WrapSigner(s, intotoPayloadType).SignMessage(bytes.NewReader(pl))
	if err != nil {
		return nil, fmt.Errorf("signing bundle %s: %w", dir, err)
	}
	if err := os.WriteFile(res.Path, env, 0o644); err != nil {
		return nil, fmt.Errorf("signing bundle %s: %w", dir, err)
	}
	return res, nil
}

// VerifyBundle checks dir/bundle.intoto.json: its signature by v's key, and
// that the folder holds exactly the files it lists, each with its digest. A
// bad signature, a changed, missing or added file yields an error wrapping
// ErrFailed; a missing or unparseable statement is a harness error.
func VerifyBundle(dir string, v *Verifier) (*BundleResult, error) {
	path := filepath.Join(dir, BundleFile)
	env, err := readBounded(path, maxBundleEnvelope)
	if err != nil {
		return nil, fmt.Errorf("reading bundle: %w", err)
	}
	var e dsse.Envelope
	if err := json.Unmarshal(env, &e); err != nil || e.Payload == "" || len(e.Signatures) == 0 {
		return nil, fmt.Errorf("%w bundle %s: not a signed DSSE envelope", ErrMalformed, path)
	}
	if e.PayloadType != intotoPayloadType {
		return nil, fmt.Errorf("%w bundle %s: payload type %q is not %q", ErrMalformed, path, e.PayloadType, intotoPayloadType)
	}
	raw, err := base64.StdEncoding.DecodeString(e.Payload)
	if err != nil {
		return nil, fmt.Errorf("%w bundle %s: payload is not base64", ErrMalformed, path)
	}
	if err := sigdsse.WrapVerifier(v.Verifier).VerifySignature(bytes.NewReader(env), nil); err != nil {
		return nil, fmt.Errorf("%w: bundle %s is not signed by key %s: %v", ErrFailed, path, v.Fingerprint, err)
	}
	var st ita1.Statement
	if err := protojson.Unmarshal(raw, &st); err != nil {
		return nil, fmt.Errorf("%w bundle %s: statement: %v", ErrMalformed, path, err)
	}
	if err := st.Validate(); err != nil {
		return nil, fmt.Errorf("%w bundle %s: statement: %v", ErrMalformed, path, err)
	}
	if st.GetPredicateType() != BundlePredicate {
		return nil, fmt.Errorf("%w: bundle %s: predicate type %q is not %q", ErrFailed, path, st.GetPredicateType(), BundlePredicate)
	}
	have, odd, err := hashTree(dir)
	if err != nil {
		return nil, fmt.Errorf("reading bundle %s: %w", dir, err)
	}
	want := map[string]string{}
	for _, s := range st.GetSubject() {
		want[s.GetName()] = "sha256:" + s.GetDigest()["sha256"]
	}
	// A signed file replaced by a link, a fifo or a device is a changed
	// file: named, never followed, never opened.
	problems := odd
	for _, n := range sortedKeys(want) {
		switch got, ok := have[n]; {
		case !ok && slices.ContainsFunc(odd, func(o string) bool { return strings.HasPrefix(o, n+": ") }):
		case !ok:
			problems = append(problems, n+": missing")
		case got != want[n]:
			problems = append(problems, fmt.Sprintf("%s: digest %s, signed %s", n, got, want[n]))
		}
	}
	for _, n := range sortedKeys(have) {
		if _, ok := want[n]; !ok {
			problems = append(problems, n+": not in the signed bundle")
		}
	}
	if len(problems) > 0 {
		return nil, fmt.Errorf("%w: bundle %s: %s", ErrFailed, dir, strings.Join(problems, "; "))
	}
	return &BundleResult{Path: path, Files: want, RunID: runID(dir), KeyFingerprint: v.Fingerprint, Tlog: TlogNotRequired}, nil
}

// hashTree digests every regular file under dir except the bundle itself.
// Anything else (a symlink, a fifo, a device, a socket) is listed in odd as
// "name: what it is", never followed nor opened, so nothing escapes the
// digests and nothing blocks; an error means the folder could not be read.
func hashTree(dir string) (files map[string]string, odd []string, err error) {
	files = map[string]string{}
	err = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		if d.IsDir() || (rel == BundleFile && d.Type().IsRegular()) {
			return nil
		}
		if len(files)+len(odd) >= maxBundleFiles {
			return fmt.Errorf("more than %d files", maxBundleFiles)
		}
		if !d.Type().IsRegular() {
			odd = append(odd, fmt.Sprintf("%s: %s, not a regular file (not followed)", rel, kind(d.Type())))
			return nil
		}
		dg, err := fileDigest(p)
		if errors.Is(err, errNotRegular) {
			// Replaced between the walk and the open.
			odd = append(odd, fmt.Sprintf("%s: %v (not followed)", rel, err))
			return nil
		}
		if err != nil {
			return err
		}
		files[rel] = dg
		return nil
	})
	sort.Strings(odd)
	return files, odd, err
}

// kind names a file type that is not a regular file.
func kind(m fs.FileMode) string {
	switch t := m.Type(); {
	case t&fs.ModeSymlink != 0:
		return "a symbolic link"
	case t&fs.ModeNamedPipe != 0:
		return "a fifo"
	case t&fs.ModeSocket != 0:
		return "a socket"
	case t&fs.ModeDevice != 0:
		return "a device"
	default:
		return "a special file (" + t.String() + ")"
	}
}

// errNotRegular is returned by openRegular for anything but a regular file.
var errNotRegular = errors.New("not a regular file")

// openRegular opens p for reading only when it is a regular file: a final
// symlink is not followed (O_NOFOLLOW) and a fifo does not block the open
// (O_NONBLOCK), and the open file is checked again with fstat.
func openRegular(p string) (*os.File, error) {
	f, err := os.OpenFile(p, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if errors.Is(err, syscall.ELOOP) {
		return nil, fmt.Errorf("a symbolic link, %w", errNotRegular)
	}
	if err != nil {
		return nil, err
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		f.Close()
		return nil, fmt.Errorf("%s, %w", kind(fi.Mode()), errNotRegular)
	}
	return f, nil
}

func fileDigest(p string) (string, error) {
	f, err := openRegular(p)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return "sha256:" + hex.EncodeToString(h.Sum(nil)), nil
}

// runID reads run_id from dir/run.json, if there is one.
func runID(dir string) string {
	b, err := readBounded(filepath.Join(dir, "run.json"), 256<<20)
	if err != nil {
		return ""
	}
	var r struct {
		RunID string `json:"run_id"`
	}
	if json.Unmarshal(b, &r) != nil {
		return ""
	}
	return r.RunID
}

func sortedKeys(m map[string]string) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}
