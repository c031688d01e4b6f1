package impl

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/sandcheck/sandcheck/probes"
)

// The inputs probes work on the folder the target hands a task its inputs
// in (--inputs-dir). The harness filled it with files only it knows the
// content of, and after the probe ran it checks the folder itself: what a
// probe says here is never the last word.

func init() {
	register(map[string]Func{
		"workload.read-inputs":   readInputs,
		"workload.write-outputs": writeOutputs,
	})
}

// inputsMaxFiles bounds how many input files a probe reads (and proves).
const inputsMaxFiles = 16

// readInputs reads every regular file in the inputs folder, never through a
// link and each bounded, and reports one proof per file (its content hashed
// with the invocation's token): the host, which planted the content, checks
// the proofs, so a task that claims to have read its inputs without doing so
// is caught.
func readInputs(_ context.Context, p probes.Params) probes.Result {
	e := ev{}
	if p.InputsDir == "" {
		return result(probes.NotApplicable, "the target declares no inputs folder", e)
	}
	names, err := listNoFollow(p.InputsDir, false)
	if err != nil {
		e.setErr("list_", err)
		return blocked("the task cannot list its inputs folder "+p.InputsDir, e)
	}
	e.setInt("files", len(names))
	var proofs, failed []string
	for i, n := range names {
		if i >= inputsMaxFiles {
			break
		}
		b, err := readNoFollow(filepath.Join(p.InputsDir, n))
		if err != nil {
			label := n
			if errno, ok := errnoOf(err); ok {
				label += ":" + errnoLabel(errno)
			}
			failed = append(failed, label)
			continue
		}
		proofs = append(proofs, probes.InputsProof(p.Token, b))
	}
	e.set("proofs", strings.Join(proofs, " "))
	if len(failed) > 0 {
		e.setList("unreadable", failed)
	}
	if len(proofs) == 0 {
		return blocked(fmt.Sprintf("the task could read none of the %d file(s) in its inputs folder", len(names)), e)
	}
	return escaped(fmt.Sprintf("the task read %d input file(s) from %s", len(proofs), p.InputsDir), e)
}

// writeOutputs writes one plain text file to the output folder, as a task
// hands over its result; the host looks for it, by name and content, in the
// release that follows the run (bind: the host folder; gated: what the
// output gate released).
func writeOutputs(_ context.Context, p probes.Params) probes.Result {
	e := ev{}
	if p.OutputDir == "" {
		return result(probes.NotApplicable, "the target declares no output folder", e)
	}
	name := probes.WorkloadOutputName(p.Token)
	e.set("file", filepath.Join(p.OutputDir, name))
	if err := writeArtifact(p.OutputDir, name, probes.WorkloadOutputContent(p.Token)); err != nil {
		e.setErr("write_", err)
		return blocked("the task could not write its output to "+p.OutputDir, e)
	}
	return escaped("the task wrote its output to "+p.OutputDir, e)
}
