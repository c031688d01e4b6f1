#!/usr/bin/env bash
# go test -exec wrapper of the host packages (scripts/go-test.sh): each test
# binary runs only while it holds the lock file $SANDCHECK_HOST_TEST_LOCK, so
# host packages never run at the same time, while go test (-p 2) compiles
# and links the next package's test binary beside the one running. flock -o:
# the test binary and what it starts do not inherit the lock, which ends
# with flock when the binary does.
set -euo pipefail
lock=${SANDCHECK_HOST_TEST_LOCK:?"the host packages' lock file (scripts/go-test.sh sets it)"}
exec flock -o "$lock" "$@"
