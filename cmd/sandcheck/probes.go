package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"
	"unicode/utf8"

	"golang.org/x/sys/unix"

	"github.com/spf13/cobra"

	"github.com/sandcheck/sandcheck/probes"
)

func probesCmd() *cobra.Command {
	c := &cobra.Command{Use: "probes", Short: "Inspect the probe catalog"}
	outs := newOutputs([]string{"table", "wide", "json"}, "table")
	list := &cobra.Command{
		Use:   "list",
		Short: "List every probe: id, criterion, controls, description",
		Long: `List every probe. CONTROLS is "proven" when the end-to-end controls must
show the probe both let through (weak reference) and blocked (hardened
references); otherwise "unproven", and -o wide says which control is missing
and why, from the spec's unproven reasons. The table fits the terminal
($COLUMNS, or 100 columns when not printing to one); -o wide adds the category
and labels and prints every column in full; -o json prints the specs.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			e, err := outs.only()
			if err != nil {
				return harness(err)
			}
			w, closeOut, err := printTo(cmd.OutOrStdout(), e)
			if err != nil {
				return harness(err)
			}
			width := 0
			if e.Format == "table" {
				width = terminalWidth(w)
			}
			if err := listProbes(w, e.Format, width); err != nil {
				closeOut()
				return err
			}
			return closeOut()
		},
	}
	addOutputFlag(list.Flags(), outs, "what to print (=FILE writes it to a file)")
	deprecatedJSON(list.Flags(), outs)
	docs := &cobra.Command{
		Use:   "docs",
		Short: "Print the catalog as Markdown (docs/probes.md is generated from this)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return writeDocs(cmd.OutOrStdout())
		},
	}
	c.AddCommand(list, docs)
	return c
}

// listProbes prints the catalog as format: json, wide (every column in
// full) or table (each line at most width columns, the description and the
// controls' reason cut to fit).
func listProbes(w io.Writer, format string, width int) error {
	cat := probes.Catalog()
	if format == "json" {
		type row struct {
			probes.Spec
			Labels   []string         `json:"labels"`
			Proven   bool             `json:"proven"`
			Unproven *probes.Unproven `json:"unproven,omitempty"`
		}
		rows := make([]row, len(cat))
		for i, s := range cat {
			rows[i] = row{Spec: s, Labels: s.AllLabels(), Proven: s.Proven()}
			if n, p := s.Controls(); n != "" || p != "" {
				rows[i].Unproven = &probes.Unproven{Negative: n, Positive: p}
			}
		}
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(rows)
	}
	unproven := 0
	for _, s := range cat {
		if !s.Proven() {
			unproven++
		}
	}
	if format == "wide" {
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "ID\tCATEGORY\tCRITERION\tCONTROLS\tLABELS\tDESCRIPTION")
		for _, s := range cat {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", s.ID, s.Category, s.Criterion, controls(s), strings.Join(s.AllLabels(), ","), s.Description)
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	} else {
		// The category is the ID's first word; the reason a probe is
		// unproven is in -o wide.
		rows := [][]string{{"ID", "CRITERION", "CONTROLS", "DESCRIPTION"}}
		for _, s := range cat {
			ctl := "proven"
			if !s.Proven() {
				ctl = "unproven"
			}
			rows = append(rows, []string{s.ID, s.Criterion, ctl, s.Description})
		}
		writeFitted(w, rows, width)
	}
	_, err := fmt.Fprintf(w, "\n%d probes, %d unproven\n", len(cat), unproven)
	return err
}

// writeFitted writes rows as columns two spaces apart, each line at most
// width runes: the last column takes what the others leave (at least 12),
// cut with "…".
func writeFitted(w io.Writer, rows [][]string, width int) {
	n := len(rows[0])
	widths := make([]int, n)
	for _, r := range rows {
		for i, c := range r[:n-1] {
			widths[i] = max(widths[i], utf8.RuneCountInString(c))
		}
	}
	used := 0
	for _, wd := range widths[:n-1] {
		used += wd + 2
	}
	last := max(width-used, 12)
	for _, r := range rows {
		var b strings.Builder
		for i, c := range r {
			if i == n-1 {
				b.WriteString(cut(c, last))
				break
			}
			b.WriteString(c)
			b.WriteString(strings.Repeat(" ", widths[i]-utf8.RuneCountInString(c)+2))
		}
		fmt.Fprintln(w, strings.TrimRight(b.String(), " "))
	}
}

// cut shortens s to n runes, ending in "…" when it had more.
func cut(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return string(r[:n-1]) + "…"
}

// terminalWidth is $COLUMNS, else the width of the terminal w is, else 100.
func terminalWidth(w io.Writer) int {
	if n, err := strconv.Atoi(os.Getenv("COLUMNS")); err == nil && n > 20 {
		return n
	}
	if f, ok := w.(*os.File); ok {
		if ws, err := unix.IoctlGetWinsize(int(f.Fd()), unix.TIOCGWINSZ); err == nil && ws.Col > 20 {
			return int(ws.Col)
		}
	}
	return 100
}

// controls is the CONTROLS column: proven, or which control is missing and
// why.
func controls(s probes.Spec) string {
	n, p := s.Controls()
	var parts []string
	if n != "" {
		parts = append(parts, "no negative control: "+n)
	}
	if p != "" {
		parts = append(parts, "no positive control: "+p)
	}
	if len(parts) == 0 {
		return "proven"
	}
	if n == p {
		return "unproven: " + n
	}
	return "unproven (" + strings.Join(parts, "; ") + ")"
}

func writeDocs(w io.Writer) error {
	var b strings.Builder
	b.WriteString("# Probe catalog\n\n<!-- Generated by `sandcheck probes docs` from probes/catalog/*.yaml. Do not edit; run `make docs`. -->\n\n")
	fmt.Fprintf(&b, "%d probes. Each is proven by a negative control (the weak reference, `fixtures/targets/weak.yaml`, lets it through) and a positive control (the hardened references block it).\n\n", len(probes.Catalog()))
	b.WriteString("| ID | criterion | severity | sandbox | expects | host evidence |\n| --- | --- | --- | --- | --- | --- |\n")
	for _, s := range probes.Catalog() {
		fmt.Fprintf(&b, "| [`%s`](#%s) | %s | %s | %s | %s | %s |\n", s.ID, strings.ReplaceAll(s.ID, ".", ""), s.Criterion, s.Severity, s.Sandbox, expects(s), strings.Join(s.Host, ", "))
	}
	for _, cat := range probes.Categories {
		first := true
		for _, s := range probes.Catalog() {
			if s.Category != cat {
				continue
			}
			if first {
				fmt.Fprintf(&b, "\n## %s\n", cat)
				first = false
			}
			fmt.Fprintf(&b, "\n### %s\n\n%s\n\n- Criterion: %s; severity: %s; labels: %s\n- Why: %s\n- Fix: %s\n- Timeout: %s", s.ID, s.Description, s.Criterion, s.Severity, strings.Join(s.AllLabels(), ", "), s.Rationale, s.Remediation, s.Timeout.D())
			if s.Bound != "" {
				fmt.Fprintf(&b, "; bound: %s", s.Bound)
			}
			fmt.Fprintf(&b, "\n- Controls: %s\n", controls(s))
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func expects(s probes.Spec) string {
	parts := []string{"default: " + string(s.Expect["default"])}
	for _, p := range probes.Profiles {
		if o, ok := s.Expect[p]; ok {
			parts = append(parts, p+": "+string(o))
		}
	}
	return strings.Join(parts, "; ")
}
