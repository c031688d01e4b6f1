package impl

import (
	"context"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/sandcheck/sandcheck/probes"
)

func init() {
	register(map[string]Func{
		"attribution.hostname":        attributionHostname,
		"attribution.hostname-change": attributionHostnameChange,
	})
}

// nodename is the sandbox's host name as the kernel (or gVisor's sentry)
// reports it.
func nodename() (string, error) {
	var u unix.Utsname
	if err := unix.Uname(&u); err != nil {
		return "", err
	}
	return unix.ByteSliceToString(u.Nodename[:]), nil
}

// attributionHostname checks that the host name the task sees carries the
// run ID the harness gave it: blocked means the sandbox's identity binds the
// run; escaped means it names nothing the run can be found by.
func attributionHostname(_ context.Context, p probes.Params) probes.Result {
	e := ev{}
	if p.RunID == "" {
		return inconclusive("no run ID given (--run-id): nothing to look for", e)
	}
	h, err := nodename()
	if err != nil {
		e.setErr("uname", err)
		return inconclusive("uname failed", e)
	}
	e.set("hostname", clip(h, 64))
	e.set("run_id", p.RunID)
	if strings.Contains(h, p.RunID) {
		return blocked("the host name carries the run ID", e)
	}
	return escaped("the host name does not name the run: logs and requests from this box cannot be tied to it", e)
}

// attributionHostnameChange sets the host name to the one it already is, so
// that nothing changes even when the call is allowed. The kernel checks
// CAP_SYS_ADMIN over the UTS namespace before it looks at the name.
func attributionHostnameChange(_ context.Context, _ probes.Params) probes.Result {
	e := ev{}
	h, err := nodename()
	if err != nil {
		e.setErr("uname", err)
		return inconclusive("uname failed", e)
	}
	e.set("hostname", clip(h, 64))
	err = unix.Sethostname([]byte(h))
	if err == nil {
		e.set("sethostname", "ok")
		return escaped("sethostname was allowed: the task can rename its host and forge the identity its logs carry", e)
	}
	n, _ := errnoOf(err)
	e.set("sethostname", errnoLabel(n))
	if n == unix.EPERM || n == unix.EACCES || n == unix.ENOSYS {
		return blocked("sethostname was refused", e)
	}
	return inconclusive("sethostname failed with an unexpected error", e)
}
