#!/usr/bin/env bash
# Regenerates the stored records the policy and report tests grade
# (policies/testdata/{weak,hardened,hardened-gvisor}.run.json) from fresh
# runs of the reference targets, never by hand: the same probes as the
# stored records hold (or PROBES, a comma-separated list of globs), run by
# the CLI in BIN (default bin), with the verdict left out (the tests grade
# the record themselves). Needs what `make run` needs: root, Docker, gVisor.
#
#   bash scripts/regen-testdata.sh [BIN]
set -euo pipefail
bin=${1:-bin}
cd "$(dirname "$0")/.."
probes=${PROBES:-$(jq -r '[.results[].probe] | join(",")' policies/testdata/weak.run.json)}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for t in weak hardened hardened-gvisor; do
	rc=0
	"$bin/sandcheck" run --target "fixtures/targets/$t.yaml" --probes "$probes" --quiet --out-dir "$tmp/$t" >"$tmp/$t.log" 2>&1 || rc=$?
	want=0
	[[ $t == weak ]] && want=1
	if ((rc != want)); then
		cat "$tmp/$t.log" >&2
		echo "regen-testdata: $t exited $rc, want $want; policies/testdata left as it was" >&2
		exit 1
	fi
	jq 'del(.verdict)' "$tmp/$t/run.json" >"$tmp/$t.run.json"
	echo "regen-testdata: $t: $(jq '.results | length' "$tmp/$t.run.json") results, exit $rc"
done
for t in weak hardened hardened-gvisor; do
	mv "$tmp/$t.run.json" "policies/testdata/$t.run.json"
done
