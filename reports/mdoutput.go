package reports

import (
	"bytes"
	"fmt"
	"strings"

	"github.com/sandcheck/sandcheck/evidence"
)

// maxOutputRows bounds the artifacts the Markdown summary lists; run.json
// has them all.
const maxOutputRows = 20

// mdOutputs lists what the output release path handed out and withheld:
// each artifact with its digest, detected type and flags. Names were chosen
// inside the sandbox, so they go through cell like every other string.
func mdOutputs(b *bytes.Buffer, rec *evidence.Record) {
	if len(rec.Outputs) == 0 {
		return
	}
	released, withheld, rows := 0, 0, 0
	var t bytes.Buffer
	for _, o := range rec.Outputs {
		if o.Release == nil {
			continue
		}
		for _, a := range o.Release.Artifacts {
			word := "withheld"
			if a.Released {
				word = "released"
				released++
			} else {
				withheld++
			}
			if rows == maxOutputRows {
				continue
			}
			rows++
			fmt.Fprintf(&t, "| %s | %s | %s | %s | %d | %s | %s | %s | %s |\n", cell(o.Token), cell(o.Release.Mode), cell(a.Path),
				cell(a.Kind), a.Size, cell(a.Type), cell(a.SHA256), cell(strings.Join(a.Flags, ", ")), word)
		}
	}
	fmt.Fprintf(b, "## Output release\n\n%d release pass(es): %d artifact(s) released, %d withheld.\n\n", len(rec.Outputs), released, withheld)
	b.WriteString("<details><summary>Artifacts</summary>\n\n")
	b.WriteString("| Token | Release | Path | Kind | Size | Type | SHA-256 | Flags | |\n| --- | --- | --- | --- | ---: | --- | --- | --- | --- |\n")
	b.Write(t.Bytes())
	if released+withheld > rows {
		fmt.Fprintf(b, "\n%d more in run.json.\n", released+withheld-rows)
	}
	b.WriteString("\n</details>\n\n")
}
