#!/usr/bin/env bash
# matrix.sh runs the reference of each sandbox kind on this machine (the
# process control, hardened bubblewrap, hardened Docker with runc and with
# gVisor's runsc) and the wrapper references (bwrap by hand, srt as root,
# as a user and strict, firejail default and strict as root and as a user),
# each through `sandcheck run` with the full catalog, and renders `sandcheck
# compare` over the runs: out/compare.md and compare.html (each cell linked
# to its run's report.html). With --docs (or its old spelling --readme) it
# also puts the matrix into docs/matrix.md between its matrix markers. A run
# that fails its verdict (exit 1: the process control always does) is a
# column like any other; one the harness could not complete (exit 2) stops
# the script, and so does a column with an inconclusive cell that its
# reference (fixtures/references/<target>.yaml) does not explain: compare
# --references refuses it, naming the column, its target and the probes,
# and nothing is published.
#
# usage: scripts/matrix.sh [--docs] BIN OUT
set -euo pipefail

readme=false
page=docs/matrix.md
if [[ ${1:-} == --docs || ${1:-} == --readme ]]; then
	readme=true
	shift
fi
bin=${1:?usage: scripts/matrix.sh [--docs] BIN OUT}
out=${2:?usage: scripts/matrix.sh [--docs] BIN OUT}

rm -rf "$out"
mkdir -p "$out"
kinds=(process:process.yaml bwrap:bwrap-hardened.yaml runc:hardened.yaml runsc:hardened-gvisor.yaml
	wrapper-bwrap:wrapper-bwrap.yaml wrapper-srt-root:wrapper-srt-root.yaml wrapper-srt-user:wrapper-srt-user.yaml
	wrapper-srt-strict:wrapper-srt-strict.yaml wrapper-firejail:wrapper-firejail.yaml
	wrapper-firejail-strict:wrapper-firejail-strict.yaml wrapper-firejail-user:wrapper-firejail-user.yaml
	wrapper-firejail-strict-user:wrapper-firejail-strict-user.yaml
	wrapper-srt-allow-ip:wrapper-srt-allow-ip.yaml)
runs=()
for kt in "${kinds[@]}"; do
	kind=${kt%%:*}
	target=fixtures/targets/${kt#*:}
	load=$(cut -d' ' -f1 /proc/loadavg)
	start=$(date +%s.%N)
	code=0
	"$bin/sandcheck" run --target "$target" --out-dir "$out/$kind" --quiet >"$out/$kind.log" 2>&1 || code=$?
	if ((code == 2)); then
		echo "matrix: the $kind run ($target) could not complete (exit 2); see $out/$kind.log" >&2
		exit 2
	fi
	printf 'matrix: %-28s %-49s exit %d in %.1f s (load average %s)\n' "$kind" "$target" "$code" "$(echo "$(date +%s.%N) - $start" | bc)" "$load" >&2
	runs+=("$out/$kind")
done
if ! "$bin/sandcheck" compare --references fixtures/references "${runs[@]}" --out-dir "$out" >"$out/compare.log" 2>&1; then
	echo "matrix: refused: sandcheck compare found a column it cannot publish (exit 2):" >&2
	cat "$out/compare.log" >&2
	exit 2
fi
echo "matrix: $out/compare.md, $out/compare.html" >&2

if $readme; then
	begin='<!-- matrix:begin (scripts/matrix.sh --docs; do not edit by hand) -->'
	end='<!-- matrix:end -->'
	grep -qxF "$begin" "$page" && grep -qxF "$end" "$page" || {
		echo "matrix: $page has no matrix markers" >&2
		exit 2
	}
	tmp=$(mktemp)
	trap 'rm -f "$tmp"' EXIT
	{
		printf '%s\n\n' "$begin"
		printf 'Generated on %s (%s, %d CPUs, kernel %s) by `make matrix`.\n\n' \
			"$(date -u +%Y-%m-%d)" "$(. /etc/os-release && echo "$PRETTY_NAME")" "$(nproc)" "$(uname -r)"
		# The summary: the first table without its probe rows, and the
		# legend after it.
		sed '1,/^$/d' "$out/compare.md" | awk '/^$/ { n++ } n >= 2 { exit } !/^\| ` /'
		printf '\n<details><summary>Every probe by sandbox kind</summary>\n\n'
		sed '1,/^$/d' "$out/compare.md"
		printf '\n</details>\n\n%s\n' "$end"
	} >"$tmp.block"
	awk -v b="$begin" -v e="$end" -v f="$tmp.block" '
		$0 == b { while ((getline l < f) > 0) print l; skip = 1; next }
		$0 == e { skip = 0; next }
		!skip' "$page" >"$tmp"
	cp "$tmp" "$page"
	rm -f "$tmp.block"
	echo "matrix: $page updated" >&2
fi
