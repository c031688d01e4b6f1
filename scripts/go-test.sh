#!/usr/bin/env bash
# The Go tests of `make test` (make go-test): two go test runs side by side.
#
#   host  every package not in PURE_PKGS (GO_TEST_FLAGS), one test binary
#         at a time: they share the harness lock, the Docker engine and the
#         host-wide leftover checks (the host-state test, the runners'
#         conformance suites), so they never overlap each other. go test
#         runs with -p 2 and each binary under scripts/test-exec-host.sh,
#         which holds a lock file while it runs: the next package's test
#         binary compiles and links beside the one running, but only one
#         runs.
#   pure  PURE_PKGS (GO_TEST_FLAGS_PURE, in parallel, at nice 10): packages
#         that touch nothing those checks compare, whose compiles and CPU
#         fill what the host packages leave idle while they wait on
#         sandboxes.
#
# Each run is read by internal/testreport as it goes (the plain output of
# each failure and package, a line per skipped test), its stream kept in
# OUT/go-test-host.json and OUT/go-test-pure.json; at the end the ten
# slowest packages and tests of both. Both run to the end; exit 1 if either
# failed. go vet is off in both: the lint stage vets every package.
#
# Env: GO, BIN, OUT, PURE_PKGS, GO_TEST_FLAGS, GO_TEST_FLAGS_PURE (the
# Makefile sets them), GO_TEST_PKGS (narrows the run to some packages) and
# whatever the tests read (SANDCHECK_BIN, CI...).
set -euo pipefail

: "${GO:=go}" "${BIN:=bin}" "${OUT:=out}"
: "${GO_TEST_FLAGS:=-count=1 -timeout 60m}" "${GO_TEST_FLAGS_PURE:=-count=1 -timeout 30m}"
[[ -n ${PURE_PKGS:-} ]] || {
	echo "go-test: PURE_PKGS is empty (run it through make go-test)" >&2
	exit 2
}
mkdir -p "$BIN" "$OUT"
"$GO" build -o "$BIN/testreport" ./internal/testreport

# shellcheck disable=SC2086 # the package patterns and flags are word lists
pure=$("$GO" list $PURE_PKGS)
all=$("$GO" list ./...)
# A pure package that is not in ./... is a Makefile mistake: say so rather
# than run less.
missing=$(grep -vxF "$all" <<<"$pure" || true)
if [[ -n $missing ]]; then
	echo "go-test: PURE_PKGS names packages that are not in ./...: $missing" >&2
	exit 2
fi
# GO_TEST_PKGS narrows both runs to some packages (default: all).
if [[ -n ${GO_TEST_PKGS:-} ]]; then
	all=$("$GO" list $GO_TEST_PKGS)
	pure=$(grep -xF "$all" <<<"$pure" || true)
fi
host=$(grep -vxF "$pure" <<<"$all" || true)
if [[ -z $pure || -z $host ]]; then
	echo "go-test: GO_TEST_PKGS must name at least one host and one pure package" >&2
	exit 2
fi
echo "go-test: $(wc -l <<<"$host") host packages one at a time, $(wc -l <<<"$pure") pure packages beside them"

rc_host=0 rc_pure=0
# The pure run in a session of its own, so that this script's end (a
# failure, an interrupt) ends it and its test binaries too, at nice 10 with
# its session's autogroup (lowprio.sh).
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck disable=SC2016 # expanded by the inner shell
setsid bash "$here/lowprio.sh" 10 bash -c 'set -o pipefail; "$0" test -json -vet=off $1 $2 2>&1 | "$3" -no-summary -raw "$4"' \
	"$GO" "$GO_TEST_FLAGS_PURE" "$pure" "$BIN/testreport" "$OUT/go-test-pure.json" &
pure_pid=$!
trap 'kill -- -"$pure_pid" 2>/dev/null || true' EXIT
export SANDCHECK_HOST_TEST_LOCK
SANDCHECK_HOST_TEST_LOCK=$(cd "$OUT" && pwd)/go-test-host.lock
# shellcheck disable=SC2086
"$GO" test -json -vet=off $GO_TEST_FLAGS -p 2 -exec "$here/test-exec-host.sh" $host 2>&1 |
	"$BIN/testreport" -no-summary -raw "$OUT/go-test-host.json" || rc_host=$?
wait "$pure_pid" || rc_pure=$?
trap - EXIT
"$BIN/testreport" -summary "$OUT/go-test-host.json" "$OUT/go-test-pure.json" || true
echo "go-test: a host package's time includes its wait for the lock (its tests' times do not)"
echo "go-test: the host packages' go test exited $rc_host, the pure packages' $rc_pure"
((rc_host == 0 && rc_pure == 0))
