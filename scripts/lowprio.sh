#!/usr/bin/env bash
# lowprio.sh N CMD...: runs CMD at nice N, for work that must only fill the
# cycles the foreground leaves idle (make test's background builds, its pure
# test packages). Called first thing in a new session (setsid), it also sets
# that session's autogroup to nice N: with the kernel's autogroup scheduling
# (sched_autogroup_enabled, on by default on Debian) each session is one
# scheduling group, and groups share the CPU equally whatever their
# processes' nice values, so `setsid nice -n 19 CMD` alone still took half
# the machine from the foreground (measured: the cluster build at 50% CPU
# beside a nice-0 compile). Without autogroups the file is absent or
# ignored, and plain nice does the work.
set -euo pipefail
n=${1:?usage: lowprio.sh N CMD...}
shift
(($# > 0)) || {
	echo "usage: lowprio.sh N CMD..." >&2
	exit 2
}
echo "$n" >/proc/self/autogroup 2>/dev/null || true
exec nice -n "$n" "$@"
