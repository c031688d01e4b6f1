package provenance

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"sort"
	"strings"
	"sync"

	"github.com/anchore/stereoscope/pkg/image"
	"github.com/anchore/syft/syft"
	"github.com/anchore/syft/syft/format/spdxjson"
	"github.com/google/go-containerregistry/pkg/name"
	// syft catalogs newer RPM databases through database/sql's "sqlite"
	// driver, as its own CLI does.
	_ "modernc.org/sqlite"
)

// SBOMFormat is the format sandcheck writes SBOMs in.
const SBOMFormat = "spdx-json"

// MaxSBOM bounds an SBOM sandcheck reads back.
const MaxSBOM = 32 << 20

// GenerateSBOM catalogs the image ref names, as the registry holds it, with
// syft and returns the SBOM as SPDX JSON.
func GenerateSBOM(ctx context.Context, ref name.Digest) ([]byte, error) {
	cfg := syft.DefaultGetSourceConfig().
		WithSources("registry").
		WithRegistryOptions(&image.RegistryOptions{InsecureUseHTTP: true})
	return catalog(ctx, ref.String(), cfg)
}

// GenerateFileSBOM catalogs a local file with syft and returns the SBOM as
// SPDX JSON: an image archive (`docker save`, OCI archive) is read as the
// image it holds, any other file as itself (a Go binary's modules come from
// its build information).
func GenerateFileSBOM(ctx context.Context, path string) ([]byte, error) {
	fi, err := os.Lstat(path)
	if err != nil {
		return nil, fmt.Errorf("cataloging %s: %w", path, err)
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("cataloging %s: not a regular file (%s)", path, fi.Mode().Type())
	}
	return catalog(ctx, path, syft.DefaultGetSourceConfig().WithSources("file"))
}

func catalog(ctx context.Context, input string, cfg *syft.GetSourceConfig) ([]byte, error) {
	src, err := syft.GetSource(ctx, input, cfg)
	if err != nil {
		return nil, fmt.Errorf("reading %s for its SBOM: %w", input, err)
	}
	defer src.Close()
	cfg2 := syft.DefaultCreateSBOMConfig().WithTool("sandcheck", "dev")
	lctx, err := licenseContext(cfg2)
	if err != nil {
		return nil, fmt.Errorf("cataloging %s: %w", input, err)
	}
	s, err := syft.CreateSBOM(withValues(ctx, lctx), src, cfg2)
	if err != nil {
		return nil, fmt.Errorf("cataloging %s: %w", input, err)
	}
	enc, err := spdxjson.NewFormatEncoderWithConfig(spdxjson.DefaultEncoderConfig())
	if err != nil {
		return nil, fmt.Errorf("encoding the SBOM of %s: %w", input, err)
	}
	var buf bytes.Buffer
	if err := enc.Encode(&buf, *s); err != nil {
		return nil, fmt.Errorf("encoding the SBOM of %s: %w", input, err)
	}
	return buf.Bytes(), nil
}

// The license scanner (a DFA over every known license text) costs more CPU
// to build than cataloging a small image; a process builds it once and
// every SBOM it makes reuses it.
var (
	licenseOnce sync.Once
	licenseCtx  context.Context
	licenseErr  error
)

func licenseContext(cfg *syft.CreateSBOMConfig) (context.Context, error) {
	licenseOnce.Do(func() {
		licenseCtx, licenseErr = syft.SetContextLicenseScanner(context.Background(), cfg.Licenses)
	})
	return licenseCtx, licenseErr
}

// valuesCtx is ctx (its deadline and cancellation) with the values of vals
// where ctx has none.
type valuesCtx struct {
	context.Context
	vals context.Context
}

func (c valuesCtx) Value(k any) any {
	if v := c.Context.Value(k); v != nil {
		return v
	}
	return c.vals.Value(k)
}

func withValues(ctx, vals context.Context) context.Context {
	return valuesCtx{Context: ctx, vals: vals}
}

// Package is one component an SBOM lists.
type Package struct {
	Name     string   `json:"name"`
	Version  string   `json:"version,omitempty"`
	Licenses []string `json:"licenses,omitempty"`
}

// String is name@version.
func (p Package) String() string {
	if p.Version == "" {
		return p.Name
	}
	return p.Name + "@" + p.Version
}

type spdxDoc struct {
	SPDXVersion string `json:"spdxVersion"`
	Packages    *[]struct {
		SPDXID           string `json:"SPDXID"`
		Name             string `json:"name"`
		VersionInfo      string `json:"versionInfo"`
		LicenseConcluded string `json:"licenseConcluded"`
		LicenseDeclared  string `json:"licenseDeclared"`
		PrimaryPurpose   string `json:"primaryPackagePurpose"`
	} `json:"packages"`
}

// ParseSBOM reads the packages of an SPDX JSON SBOM (the image itself, which
// SPDX lists as a package too, is left out). A document that is not SPDX
// JSON is an error wrapping ErrMalformed.
func ParseSBOM(b []byte) ([]Package, error) {
	if len(b) > MaxSBOM {
		return nil, fmt.Errorf("%w SBOM: larger than %d bytes", ErrMalformed, MaxSBOM)
	}
	var d spdxDoc
	if err := json.Unmarshal(b, &d); err != nil {
		return nil, fmt.Errorf("%w SBOM: not JSON: %v", ErrMalformed, err)
	}
	if !strings.HasPrefix(d.SPDXVersion, "SPDX-") || d.Packages == nil {
		return nil, fmt.Errorf("%w SBOM: not an SPDX JSON document (spdxVersion %q, packages missing: %t)", ErrMalformed, d.SPDXVersion, d.Packages == nil)
	}
	var out []Package
	for _, p := range *d.Packages {
		if p.PrimaryPurpose == "CONTAINER" || strings.HasPrefix(p.SPDXID, "SPDXRef-DocumentRoot") {
			continue
		}
		if p.Name == "" {
			return nil, fmt.Errorf("%w SBOM: package %s has no name", ErrMalformed, p.SPDXID)
		}
		pk := Package{Name: p.Name, Version: p.VersionInfo}
		for _, l := range []string{p.LicenseDeclared, p.LicenseConcluded} {
			if l != "" && l != "NOASSERTION" && l != "NONE" && !containsStr(pk.Licenses, l) {
				pk.Licenses = append(pk.Licenses, l)
			}
		}
		out = append(out, pk)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].String() < out[j].String() })
	return out, nil
}

func containsStr(ss []string, s string) bool {
	for _, x := range ss {
		if x == s {
			return true
		}
	}
	return false
}

// Digest is "sha256:" and the hex sha256 of b.
func Digest(b []byte) string {
	sum := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(sum[:])
}
