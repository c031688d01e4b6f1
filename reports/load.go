package reports

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/sandcheck/sandcheck/evidence"
)

// maxRecordBytes bounds one stored run.json the comparing commands read.
const maxRecordBytes = 256 << 20

// maxRecords bounds how many stored runs one history or comparison reads.
const maxRecords = 2000

// LoadRecord reads a stored run record: path is a run.json file or a folder
// holding one. Errors name the file.
func LoadRecord(path string) (*evidence.Record, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("reading run record: %w", err)
	}
	if st.IsDir() {
		path = filepath.Join(path, "run.json")
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("reading run record: %w", err)
	}
	defer f.Close()
	var b bytes.Buffer
	if _, err := b.ReadFrom(io.LimitReader(f, maxRecordBytes+1)); err != nil {
		return nil, fmt.Errorf("reading run record %s: %w", path, err)
	}
	if b.Len() > maxRecordBytes {
		return nil, fmt.Errorf("reading run record %s: larger than %d bytes", path, maxRecordBytes)
	}
	if len(bytes.TrimSpace(b.Bytes())) == 0 {
		return nil, fmt.Errorf("reading run record %s: the file is empty (no JSON record)", path)
	}
	var rec evidence.Record
	dec := json.NewDecoder(&b)
	if err := dec.Decode(&rec); err != nil {
		return nil, fmt.Errorf("reading run record %s: %w", path, err)
	}
	if rec.Schema != evidence.Schema {
		return nil, fmt.Errorf("reading run record %s: schema %q, want %q", path, plain(rec.Schema), evidence.Schema)
	}
	return &rec, nil
}

// Stored is a run record and the file it came from.
type Stored struct {
	Path   string
	Record *evidence.Record
}

// LoadRecords reads every run.json named by paths: a file, or a folder
// searched recursively for files named run.json. The runs come back oldest
// first (by start time, then path). A path that holds no record is an
// error.
func LoadRecords(paths []string) ([]Stored, error) {
	var files []string
	for _, p := range paths {
		st, err := os.Stat(p)
		if err != nil {
			return nil, fmt.Errorf("reading run records: %w", err)
		}
		if !st.IsDir() {
			files = append(files, p)
			continue
		}
		n := 0
		err = filepath.WalkDir(p, func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if !d.IsDir() && d.Name() == "run.json" {
				files = append(files, path)
				n++
				if len(files) > maxRecords {
					return fmt.Errorf("more than %d run records", maxRecords)
				}
			}
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("reading run records under %s: %w", p, err)
		}
		if n == 0 {
			return nil, fmt.Errorf("reading run records: no run.json under %s", p)
		}
	}
	if len(files) == 0 {
		return nil, errors.New("reading run records: no run.json named")
	}
	var out []Stored
	for _, f := range files {
		rec, err := LoadRecord(f)
		if err != nil {
			return nil, err
		}
		out = append(out, Stored{f, rec})
	}
	sort.SliceStable(out, func(i, j int) bool {
		a, b := out[i].Record.StartedAt, out[j].Record.StartedAt
		if !a.Equal(b) {
			return a.Before(b)
		}
		return strings.Compare(out[i].Path, out[j].Path) < 0
	})
	return out, nil
}
