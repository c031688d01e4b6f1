package reports

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/sandcheck/sandcheck/evidence"
)

// Writer writes one report format.
type Writer interface {
	// Format is the name the writer is selected by ("junit").
	Format() string
	// Write writes the report of rec, including its verdict if it has one.
	Write(w io.Writer, rec *evidence.Record) error
}

// format ties a writer to the file WriteAll puts it in.
type format struct {
	w    Writer
	file string
}

// formats lists every writer, in the order WriteAll writes them.
var formats = []format{
	{JSON{}, "run.json"},
	{JUnit{}, "junit.xml"},
	{Markdown{}, "summary.md"},
	{SARIF{}, "results.sarif"},
	{HTML{}, "report.html"},
	{RisksJSON{}, "risks.json"},
}

// Formats returns the names of all formats, in WriteAll's default order.
func Formats() []string {
	out := make([]string, len(formats))
	for i, f := range formats {
		out[i] = f.w.Format()
	}
	return out
}

func lookup(name string) (format, error) {
	for _, f := range formats {
		if f.w.Format() == name {
			return f, nil
		}
	}
	return format{}, fmt.Errorf("unknown report format %q (known: %v)", name, Formats())
}

// ByName returns the writer for a format name; an unknown name is an error.
func ByName(name string) (Writer, error) {
	f, err := lookup(name)
	if err != nil {
		return nil, err
	}
	return f.w, nil
}

// WriteAll writes rec in each of formats (all of Formats() when formats is
// empty) into dir, creating dir if needed, and returns the paths written.
// Every name is checked before anything is written. Each file is written to
// a temporary name and renamed, so a reader never sees half a report. When
// the Markdown summary is among the formats and $GITHUB_STEP_SUMMARY names
// a file (as in a GitHub Actions step), the summary is appended to it too.
func WriteAll(dir string, rec *evidence.Record, formats []string) ([]string, error) {
	if rec == nil {
		return nil, errors.New("writing reports: record is nil")
	}
	if len(formats) == 0 {
		formats = Formats()
	}
	var todo []format
	seen := map[string]bool{}
	for _, name := range formats {
		f, err := lookup(name)
		if err != nil {
			return nil, fmt.Errorf("writing reports: %w", err)
		}
		if !seen[name] {
			seen[name] = true
			todo = append(todo, f)
		}
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("writing reports: %w", err)
	}
	var paths []string
	for _, f := range todo {
		p := filepath.Join(dir, f.file)
		if err := writeFile(p, f.w, rec); err != nil {
			return paths, fmt.Errorf("writing %s report: %w", f.w.Format(), err)
		}
		paths = append(paths, p)
		if _, ok := f.w.(Markdown); ok {
			if err := AppendStepSummary(os.Getenv("GITHUB_STEP_SUMMARY"), rec); err != nil {
				return paths, err
			}
		}
	}
	return paths, nil
}

// AppendStepSummary appends the Markdown summary of rec to the file at path,
// GitHub Actions' job summary ($GITHUB_STEP_SUMMARY); an empty path does
// nothing.
func AppendStepSummary(path string, rec *evidence.Record) error {
	if path == "" {
		return nil
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return fmt.Errorf("writing the step summary: %w", err)
	}
	if err := (Markdown{}).Write(f, rec); err != nil {
		f.Close()
		return fmt.Errorf("writing the step summary: %w", err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("writing the step summary: %w", err)
	}
	return nil
}

func writeFile(path string, w Writer, rec *evidence.Record) (err error) {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	if err := w.Write(tmp, rec); err != nil {
		return err
	}
	if err := tmp.Chmod(0o644); err != nil {
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}
