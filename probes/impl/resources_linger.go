package impl

import (
	"context"

	"github.com/sandcheck/sandcheck/probes"
)

// Processes that try to outlive their task by resisting the ways a runtime
// ends a task's processes: a signal it ignores, a session of its own. They
// work as persistence.background-process does (lingerProbe): the plant task
// starts the process, the next task looks for it.
func init() {
	register(map[string]Func{
		"resources.sigterm-ignore": sigtermIgnore,
		"resources.setsid-daemon":  setsidDaemon,
	})
}

// sigtermIgnore plants or looks for a process ignoring SIGTERM, SIGHUP and
// SIGINT.
func sigtermIgnore(ctx context.Context, p probes.Params) probes.Result {
	return lingerProbe(ctx, p, "noterm")
}

// setsidDaemon plants or looks for a double-forked daemon in a session of
// its own.
func setsidDaemon(ctx context.Context, p probes.Params) probes.Result {
	return lingerProbe(ctx, p, "daemon")
}
