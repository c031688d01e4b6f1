package reports

import (
	"bytes"
	"strings"
	"testing"

	"github.com/sandcheck/sandcheck/evidence"
	"github.com/sandcheck/sandcheck/output"
)

func TestMarkdownListsOutputArtifacts(t *testing.T) {
	rec := hostileRecord()
	rec.Outputs = []evidence.OutputRelease{{Token: "sc1", Release: &output.Release{Mode: output.ModeGated, Source: "tar-stream",
		Artifacts: []output.Artifact{
			{Path: "ok.txt", Kind: output.KindFile, Size: 5, Type: "text/plain; charset=utf-8", SHA256: "sha256:abc", Released: true},
			{Path: "<script>evil</script>|\x1b[2K", Kind: output.KindFile, Size: 9, Type: "text/html", Flags: []string{output.FlagActiveContent, output.FlagControlName}},
		}}}}
	var buf bytes.Buffer
	if err := (Markdown{}).Write(&buf, rec); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	if !strings.Contains(out, "1 release pass(es): 1 artifact(s) released, 1 withheld.") {
		t.Errorf("no output summary in:\n%s", out)
	}
	if strings.Contains(out, "\x1b") {
		t.Error("an escape character from an artifact name reached the report")
	}
	rows := 0
	for _, line := range strings.Split(out, "\n") {
		if !strings.HasPrefix(line, "| `` sc1") && !strings.HasPrefix(line, "| ` sc1") {
			continue
		}
		rows++
		rest := stripCodeSpans(t, line)
		if strings.Contains(rest, "script") {
			t.Errorf("an artifact name is outside a code span: %q", line)
		}
		if cells := strings.Count(rest, "|") - 1; cells != 9 {
			t.Errorf("row has %d cells, want 9: %q", cells, line)
		}
		if strings.Contains(line, "ok.txt") && (!strings.Contains(line, "sha256:abc") || !strings.HasSuffix(line, "released |")) {
			t.Errorf("released artifact row lacks digest or status: %q", line)
		}
	}
	if rows != 2 {
		t.Errorf("%d artifact rows, want 2:\n%s", rows, out)
	}
}
