package impl

import (
	"context"

	"github.com/sandcheck/sandcheck/probes"
)

func init() {
	register(map[string]Func{
		"privilege.opensandbox-execd-published": osbExecdPublished,
	})
}

// osbExecdPublished is the box's half of a host check: where the platform
// publishes execd's port on the host cannot be seen from inside, so the
// probe only confirms that it runs beside an execd and leaves the outcome
// to the host's check of the platform (runtime:execd-published).
func osbExecdPublished(ctx context.Context, p probes.Params) probes.Result {
	e := ev{}
	if !osbInBox(ctx, e) {
		return notOpenSandbox(e)
	}
	e.set("sent", "false")
	return inconclusive("execd answers in the box; on which host addresses its port is published only the host's check of the platform can tell", e)
}
