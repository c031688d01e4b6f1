package main

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/sandcheck/sandcheck/engine"
	"github.com/sandcheck/sandcheck/reports"
)

// The CLI's flag vocabulary, one for every command, as trivy, syft and
// cosign use it:
//
//	-o, --output FORMAT[=FILE]   what to print (repeatable; =FILE writes that format to a file)
//	    --out-dir DIR            the folder a command writes its reports into
//	-q, --quiet / -v, --verbose  less or more on the console
//	    --version                the root's version
//
// Booleans are plain switches (--fail-on-warn, --trace=false). The spellings
// used before (--json, --format, --out, the root's -v) keep working for one
// release, each printing a deprecation line when used.

// output is one -o value: a format and, with FORMAT=FILE, the file it goes to.
type output struct {
	Format string
	File   string
}

// outputs is the value of a command's -o/--output flag: the formats it
// knows, the ones asked for in order, and its default when none is.
type outputs struct {
	known []string
	def   []string
	list  []output
}

func newOutputs(known []string, def ...string) *outputs {
	return &outputs{known: known, def: def}
}

func (o *outputs) String() string {
	var parts []string
	for _, e := range o.effective() {
		if e.File != "" {
			parts = append(parts, e.Format+"="+e.File)
		} else {
			parts = append(parts, e.Format)
		}
	}
	return strings.Join(parts, ",")
}

// Set takes FORMAT, FORMAT=FILE, or a comma list of formats (the old
// --format json,sarif spelling).
func (o *outputs) Set(s string) error {
	format, file, hasFile := strings.Cut(s, "=")
	formats := []string{format}
	if !hasFile {
		formats = strings.Split(s, ",")
	} else if file == "" {
		return fmt.Errorf("%q: FORMAT=FILE needs a file name", s)
	}
	for _, f := range formats {
		f = strings.TrimSpace(f)
		if !slices.Contains(o.known, f) {
			return fmt.Errorf("unknown format %q (known: %s)", f, strings.Join(o.known, ", "))
		}
		o.list = append(o.list, output{Format: f, File: file})
	}
	return nil
}

func (o *outputs) Type() string { return "format" }

// effective is what was asked for, or the default.
func (o *outputs) effective() []output {
	if len(o.list) > 0 {
		return o.list
	}
	out := make([]output, len(o.def))
	for i, f := range o.def {
		out[i] = output{Format: f}
	}
	return out
}

// formats lists the asked-for formats once each, in order.
func (o *outputs) formats() []string {
	var out []string
	for _, e := range o.effective() {
		if !slices.Contains(out, e.Format) {
			out = append(out, e.Format)
		}
	}
	return out
}

// has reports whether format was asked for.
func (o *outputs) has(format string) bool {
	return slices.Contains(o.formats(), format)
}

// only is the single format a printing command was asked for: one -o value
// at most, its file if it named one.
func (o *outputs) only() (output, error) {
	e := o.effective()
	if len(e) != 1 {
		return output{}, fmt.Errorf("-o/--output: this command prints one format, not %d", len(e))
	}
	return e[0], nil
}

// addOutputFlag defines -o/--output on f.
func addOutputFlag(f *pflag.FlagSet, o *outputs, what string) {
	f.VarP(o, "output", "o", fmt.Sprintf("%s (`FORMAT[=FILE]`, one of %s)", what, strings.Join(o.known, ", ")))
}

// printTo opens where one printed format goes: the file e names (created,
// replacing an earlier one) or w.
func printTo(w io.Writer, e output) (io.Writer, func() error, error) {
	if e.File == "" {
		return w, func() error { return nil }, nil
	}
	f, err := os.OpenFile(e.File, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return nil, nil, fmt.Errorf("-o %s=%s: %w", e.Format, e.File, err)
	}
	return f, f.Close, nil
}

// deprecatedJSON adds the old --json switch beside -o: using it asks for
// -o json, with a deprecation line.
func deprecatedJSON(f *pflag.FlagSet, o *outputs) {
	f.AddFlag(&pflag.Flag{Name: "json", Usage: "deprecated: use -o json", Value: jsonSwitch{o}, DefValue: "false", NoOptDefVal: "true"})
	_ = f.MarkDeprecated("json", "use -o json (--json goes in the next release)")
}

// jsonSwitch is --json: true asks o for json.
type jsonSwitch struct{ o *outputs }

func (j jsonSwitch) String() string { return fmt.Sprint(j.o.has("json") && len(j.o.list) > 0) }
func (j jsonSwitch) Set(s string) error {
	switch s {
	case "true":
		return j.o.Set("json")
	case "false":
		return nil
	}
	return fmt.Errorf("%q: want true or false", s)
}
func (j jsonSwitch) Type() string     { return "bool" }
func (j jsonSwitch) IsBoolFlag() bool { return true }

// deprecatedAlias adds old as a second name of the flag current (the same
// value), hidden, with a deprecation line when used.
func deprecatedAlias(f *pflag.FlagSet, old, current string) {
	cur := f.Lookup(current)
	if cur == nil {
		panic("deprecatedAlias: no flag --" + current)
	}
	f.AddFlag(&pflag.Flag{Name: old, Usage: "deprecated: use --" + current, Value: cur.Value, DefValue: cur.DefValue, NoOptDefVal: cur.NoOptDefVal})
	_ = f.MarkDeprecated(old, "use --"+current+" (--"+old+" goes in the next release)")
}

// setVocabulary gives the root its --version (the old -v shorthand kept,
// deprecated) and every command's help plain boolean switches: pflag
// renders a boolean as --name[=true|false], which reads as if it took a
// value.
func setVocabulary(root *cobra.Command) {
	root.Flags().BoolP("version", "v", false, "print the version")
	_ = root.Flags().MarkShorthandDeprecated("version", "use --version (-v is --verbose on the commands that print progress)")
	cobra.AddTemplateFunc("plainFlagUsages", plainFlagUsages)
	t := root.UsageTemplate()
	t = strings.ReplaceAll(t, ".LocalFlags.FlagUsages", "plainFlagUsages .LocalFlags")
	t = strings.ReplaceAll(t, ".InheritedFlags.FlagUsages", "plainFlagUsages .InheritedFlags")
	root.SetUsageTemplate(t)
}

// plainFlagUsages is fs.FlagUsages with each boolean shown as a switch.
func plainFlagUsages(fs *pflag.FlagSet) string {
	shown := pflag.NewFlagSet("", pflag.ContinueOnError)
	fs.VisitAll(func(f *pflag.Flag) {
		c := *f
		if c.Value.Type() == "bool" {
			c.Value = plainBool{f.Value}
		}
		shown.AddFlag(&c)
	})
	return shown.FlagUsages()
}

// plainBool shows a boolean flag without pflag's [=true|false].
type plainBool struct{ pflag.Value }

func (plainBool) Type() string     { return "boolfunc" }
func (plainBool) IsBoolFlag() bool { return true }

// named reports whether any -o value names a file.
func named(o *outputs) bool {
	for _, e := range o.list {
		if e.File != "" {
			return true
		}
	}
	return false
}

// writeNamedOutputs writes each report asked for as FORMAT=FILE to its
// file (beside the copy in the output folder, if any), through a temporary
// name so a reader never sees half of one, and adds the paths to the
// outcome's reports.
func writeNamedOutputs(o *engine.Outcome, outs *outputs) error {
	if o == nil || o.Record == nil {
		return nil
	}
	for _, e := range outs.list {
		if e.File == "" {
			continue
		}
		w, err := reports.ByName(e.Format)
		if err != nil {
			return err
		}
		var buf bytes.Buffer
		if err := w.Write(&buf, o.Record); err != nil {
			return fmt.Errorf("-o %s=%s: %w", e.Format, e.File, err)
		}
		tmp := e.File + ".tmp"
		if err := os.WriteFile(tmp, buf.Bytes(), 0o644); err != nil {
			return fmt.Errorf("-o %s=%s: %w", e.Format, e.File, err)
		}
		if err := os.Rename(tmp, e.File); err != nil {
			os.Remove(tmp)
			return fmt.Errorf("-o %s=%s: %w", e.Format, e.File, err)
		}
		o.Reports = append(o.Reports, e.File)
	}
	return nil
}

// printFlag gives a printing command its -o/--output (text, or json with
// the shape desc gives; =FILE prints into a file instead of stdout) and the
// old --json switch. Before the command runs, *asJSON says whether json was
// asked for and the command's output is the named file, if any.
func printFlag(c *cobra.Command, asJSON *bool, desc string) {
	outs := newOutputs([]string{"text", "json"}, "text")
	addOutputFlag(c.Flags(), outs, "what to print; json is "+desc)
	deprecatedJSON(c.Flags(), outs)
	prev := c.PreRunE
	c.PreRunE = func(cmd *cobra.Command, args []string) error {
		e, err := outs.only()
		if err != nil {
			return harness(err)
		}
		*asJSON = e.Format == "json"
		if e.File != "" {
			// Closed when the process exits; an *os.File does not buffer.
			w, _, err := printTo(cmd.OutOrStdout(), e)
			if err != nil {
				return harness(err)
			}
			cmd.SetOut(w)
		}
		if prev != nil {
			return prev(cmd, args)
		}
		return nil
	}
}
