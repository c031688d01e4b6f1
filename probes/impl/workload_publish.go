package impl

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/http"

	"github.com/sandcheck/sandcheck/probes"
)

// Publishing, the workload of a human-approved-publish profile: the task
// hands its deliverable to the platform's publishing endpoint, which holds
// it for scan, preview and approval before it reaches the approved
// destination. The harness's tool broker stands for that endpoint (the
// task's scoped token, nothing else reaches it).
func init() {
	register(map[string]Func{"workload.publish-message": workloadPublish})
}

// workloadPublish submits a short message with its digest (what the
// reviewer approves and the immutable record keeps) to the publishing
// endpoint with the task's token. Escaped means the endpoint took it.
func workloadPublish(ctx context.Context, p probes.Params) probes.Result {
	e := ev{}
	if p.BrokerAddr == "" {
		return noAddress("publishing endpoint (tool broker)", e)
	}
	text := "Release notes drafted by the task (sandcheck publish " + headerSafe(p.Token) + ")."
	sum := sha256.Sum256([]byte(text))
	msg, err := json.Marshal(map[string]string{
		"kind": "message", "destination": "approved", "body": text,
		"sha256": hex.EncodeToString(sum[:]),
	})
	if err != nil {
		e.setErr("", err)
		return inconclusive("the deliverable could not be encoded", e)
	}
	e.set("sha256", hex.EncodeToString(sum[:8]))
	steps := []brokerStep{{http.MethodPost, "op=publish&review=required", string(msg)}}
	return brokerWorkload(ctx, p, e, "workload.publish-message", steps,
		"the publishing endpoint took the task's deliverable for review with its token")
}
