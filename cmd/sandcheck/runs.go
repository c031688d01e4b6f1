package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/sandcheck/sandcheck/evidence"
	"github.com/sandcheck/sandcheck/provenance"
)

// Bounds on what `runs find` reads.
const (
	maxRunRecords = 100000
	maxRunRecord  = 256 << 20
)

func runsCmd() *cobra.Command {
	c := &cobra.Command{
		Use:   "runs",
		Short: "Questions over stored runs",
	}
	var pkg string
	find := &cobra.Command{
		Use:   "find --package NAME[@VERSION] DIR",
		Short: "List the stored runs under DIR whose image contains a component",
		Long: `find walks DIR for run records (run.json) and reads the SBOM each stored
with its image (the record's provenance section names it and its digest). It
prints one line per run whose image holds the package: the run folder, run
ID, target, image digest and the matching package. Names match exactly
(case-insensitive); a version, when given, too.

Exit codes: 0 at least one run matches; 1 none does; 2 DIR cannot be read,
or a record or SBOM is malformed or does not match its digest.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			name, version, _ := strings.Cut(pkg, "@")
			if name == "" {
				return harness(errors.New("--package NAME[@VERSION] is required"))
			}
			hits, scanned, err := findRuns(args[0], name, version)
			if err != nil {
				return harness(err)
			}
			w := cmd.OutOrStdout()
			for _, h := range hits {
				fmt.Fprintln(w, h)
			}
			fmt.Fprintf(cmd.ErrOrStderr(), "%d of %d runs with an SBOM contain %s\n", len(hits), scanned, pkg)
			if len(hits) == 0 {
				return &exitError{code: exitFail}
			}
			return nil
		},
	}
	find.Flags().StringVar(&pkg, "package", "", "component NAME or NAME@VERSION")
	c.AddCommand(find)
	return c
}

// findRuns returns one line per run under root whose SBOM lists the
// package, and how many runs with an SBOM it read.
func findRuns(root, name, version string) ([]string, int, error) {
	var hits []string
	seen, scanned := 0, 0
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() || d.Name() != "run.json" {
			return nil
		}
		if seen++; seen > maxRunRecords {
			return fmt.Errorf("more than %d run records", maxRunRecords)
		}
		rec, pkgs, err := runPackages(p)
		if err != nil {
			return err
		}
		if rec == nil {
			return nil
		}
		scanned++
		for _, pk := range pkgs {
			if strings.EqualFold(pk.Name, name) && (version == "" || pk.Version == version) {
				hits = append(hits, fmt.Sprintf("%s\trun %s\ttarget %s\timage %s\t%s", filepath.Dir(p), rec.RunID, rec.Target.Name, rec.Provenance.Digest, pk))
			}
		}
		return nil
	})
	if err != nil {
		return nil, 0, fmt.Errorf("finding runs under %s: %w", root, err)
	}
	return hits, scanned, nil
}

// runPackages reads a run record and the SBOM stored with it, checked
// against the digest the record holds. A record without an SBOM yields nil.
func runPackages(path string) (*evidence.Record, []provenance.Package, error) {
	b, err := readCapped(path, maxRunRecord)
	if err != nil {
		return nil, nil, err
	}
	var rec evidence.Record
	if err := json.Unmarshal(b, &rec); err != nil {
		return nil, nil, fmt.Errorf("%s: malformed run record: %w", path, err)
	}
	if rec.Provenance == nil || rec.Provenance.SBOM == nil {
		return nil, nil, nil
	}
	sb := rec.Provenance.SBOM
	sp := sb.Path
	if !filepath.IsAbs(sp) {
		sp = filepath.Join(filepath.Dir(path), sp)
	}
	sbom, err := readCapped(sp, provenance.MaxSBOM)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: reading its SBOM: %w", path, err)
	}
	if got := provenance.Digest(sbom); got != sb.Digest {
		return nil, nil, fmt.Errorf("%s: SBOM %s has digest %s, the record says %s", path, sp, got, sb.Digest)
	}
	pkgs, err := provenance.ParseSBOM(sbom)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", sp, err)
	}
	return &rec, pkgs, nil
}

func readCapped(path string, max int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if st.Size() > max {
		return nil, fmt.Errorf("%s is larger than %d bytes", path, max)
	}
	b := make([]byte, st.Size())
	if _, err := f.ReadAt(b, 0); err != nil && st.Size() > 0 {
		return nil, fmt.Errorf("reading %s: %w", path, err)
	}
	return b, nil
}
