package probes

import (
	"crypto/sha256"
	"encoding/hex"
)

// InputsWritePrefix starts the name of the file persistence.inputs-writable
// tries to add to the inputs folder; the probe's token follows. The host
// finds it by that name when it checks the folder after the probe ran.
const InputsWritePrefix = ".sandcheck-inputs-write-"

// InputsProofLen is the length in hex digits of an inputs proof.
const InputsProofLen = 16

// InputsProof is what a task reports for one input file it read: a hash of
// the probe invocation's token and the file's content. The host, which
// planted the content, computes the same; the token keeps a proof from one
// invocation from serving another.
func InputsProof(token string, content []byte) string {
	h := sha256.New()
	h.Write([]byte(token + ":"))
	h.Write(content)
	return hex.EncodeToString(h.Sum(nil))[:InputsProofLen]
}

// WorkloadOutputName is the file workload.write-outputs writes to the output
// folder, named so the host finds it in the release by the probe's token.
func WorkloadOutputName(token string) string {
	return OutputArtifactPrefix(token, "workload.write-outputs") + ".txt"
}

// WorkloadOutputContent is what workload.write-outputs writes: plain text
// the output gate has no reason to withhold, which the host recomputes to
// check that what came out is what the task wrote.
func WorkloadOutputContent(token string) []byte {
	return []byte("Summary written by the task (sandcheck workload output " + token + ").\n")
}
