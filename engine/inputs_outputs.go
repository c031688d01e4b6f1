package engine

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"

	"github.com/sandcheck/sandcheck/evidence"
	"github.com/sandcheck/sandcheck/output"
	"github.com/sandcheck/sandcheck/probes"
)

// workloadOutputEvidence is the host's account of workload.write-outputs:
// the plain file the task wrote must come out of the release that followed
// its run, as a regular file with the content the task was to write (the
// host recomputes it from the token). Withheld or missing, the target's
// release path breaks a task's ordinary output: blocked, which fails
// usability.
func (e *Engine) workloadOutputEvidence(token string) evidence.Item {
	it := evidence.Item{Source: evidence.SourceOutput, Kind: "workload-output"}
	if e.out == nil {
		it.Kind, it.Summary = "output-undeclared", "the target declares no output folder"
		return it
	}
	e.out.mu.Lock()
	rel := e.out.releases[token]
	e.out.mu.Unlock()
	if rel == nil {
		it.Summary = "the harness took no release after the probe's run"
		return it
	}
	name := probes.WorkloadOutputName(token)
	sum := sha256.Sum256(probes.WorkloadOutputContent(token))
	want := "sha256:" + hex.EncodeToString(sum[:])
	it.Data = map[string]string{"token": token, "mode": rel.Mode, "file": name}
	for _, a := range rel.Artifacts {
		if a.Path != name {
			continue
		}
		switch {
		case a.Kind == output.KindFile && a.Released && a.SHA256 == want:
			it.Indicates = probes.Escaped
			it.Summary = fmt.Sprintf("the task's output %s came out of the %s release as written (%s)", name, rel.Mode, describeArtifact(a))
		case a.Kind == output.KindFile && a.Released:
			it.Indicates = probes.Blocked
			it.Summary = fmt.Sprintf("the task's output %s came out of the %s release with other content than the task wrote (%s)", name, rel.Mode, describeArtifact(a))
		default:
			it.Indicates = probes.Blocked
			it.Summary = fmt.Sprintf("the %s release withheld the task's plain output %s (%s)", rel.Mode, name, describeArtifact(a))
		}
		return it
	}
	it.Indicates = probes.Blocked
	it.Summary = fmt.Sprintf("the task's output %s is not in the %s release: %s", name, rel.Mode, truncate(rel.Summary(), 200))
	return it
}
