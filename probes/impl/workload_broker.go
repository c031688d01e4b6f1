package impl

import (
	"context"
	"fmt"
	"net/http"
	"strings"

	"github.com/sandcheck/sandcheck/probes"
)

// A brokered call, the workload of a brokered-data-task profile: the task
// queries and updates a bounded business resource through the tool broker,
// with the scoped token the platform handed it, never with a raw
// credential.
func init() {
	register(map[string]Func{"workload.broker-query": workloadBrokerQuery})
}

// brokerMaxBody bounds what a workload sends the broker and reads back.
const brokerMaxBody = 1 << 10

// brokerStep is one call of a brokered workload.
type brokerStep struct {
	method, query, body string
}

// workloadBrokerQuery makes the calls a brokered task makes, a query and
// then an update of the resource it read, each with the task's broker token
// and the probe's token. Escaped means the broker served every call.
func workloadBrokerQuery(ctx context.Context, p probes.Params) probes.Result {
	e := ev{}
	if p.BrokerAddr == "" {
		return noAddress("tool broker", e)
	}
	steps := []brokerStep{
		{http.MethodGet, "resource=tickets&limit=10", ""},
		{http.MethodPost, "resource=tickets&op=update", `{"id":1,"status":"triaged"}`},
	}
	return brokerWorkload(ctx, p, e, "workload.broker-query", steps,
		"the tool broker served the task's query and update with its token")
}

// brokerWorkload runs the steps against the tool broker with the task's
// broker token and decides: every step served is escaped (the workload went
// through), the broker refusing the token or no connection is blocked.
func brokerWorkload(ctx context.Context, p probes.Params, e ev, probe string, steps []brokerStep, served string) probes.Result {
	e.set("server", p.BrokerAddr)
	e.set("with_token", fmt.Sprint(p.BrokerToken != ""))
	for i, s := range steps {
		status, body, connected, err := brokerDo(ctx, p, probe, s)
		if err != nil {
			e.setErr("", err)
			e.setInt("step", i+1)
			if connected {
				return inconclusive("a connection to the tool broker opened, but no answer came", e)
			}
			return blocked("no connection to the tool broker could be made", e)
		}
		e.setInt("status", status)
		switch {
		case status == http.StatusUnauthorized || status == http.StatusForbidden:
			e.setInt("step", i+1)
			return blocked(fmt.Sprintf("the tool broker refused the task's token (%s %d)", s.method, status), e)
		case status != http.StatusOK || !strings.HasPrefix(body, brokerReply):
			e.setInt("step", i+1)
			return inconclusive("something answered at the tool broker's address, but not as the harness's broker", e)
		}
	}
	e.setInt("calls", len(steps))
	return escaped(served, e)
}

// brokerDo sends one call to the broker's path, straight to its address,
// with the task's broker token and the probe's token, and returns the
// status, the start of the answer and whether a connection opened
// (brokerRequest, secrets_broker.go).
func brokerDo(ctx context.Context, p probes.Params, probe string, s brokerStep) (int, string, bool, error) {
	return brokerRequest(ctx, p, probe, s.method, brokerPath+"?"+s.query, s.body, "application/json", p.BrokerToken)
}
