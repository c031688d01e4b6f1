#!/usr/bin/env bash
# reference-result.sh writes the reference result file of a whole-catalog
# run (fixtures/references/<target>.yaml, read by e2e's
# TestReferenceResults and by `sandcheck compare --references`) from the
# run's run.json: every criterion that does not pass, every probe whose
# effective outcome is not blocked. The reasons of the inconclusive probes
# are kept from the file it replaces; a new inconclusive probe gets none,
# and the file is then refused until someone writes why (a reviewed
# explanation, never a generated one). A probe that varies by run is
# written by hand as "a|b" and kept.
#
# usage: scripts/reference-result.sh RUN_DIR [OUT_FOLDER]
set -euo pipefail

run=${1:?usage: scripts/reference-result.sh RUN_DIR [OUT_FOLDER]}
dir=${2:-fixtures/references}
rec=$run/run.json
target=$(jq -r '.target.name' "$rec")
[[ $target =~ ^[a-z0-9][a-z0-9-]*$ ]] || {
	echo "reference-result: $rec names target \"$target\"" >&2
	exit 2
}
file=$dir/$target.yaml
declare -A why=() varies=()
if [[ -f $file ]]; then
	section=
	while IFS= read -r line; do
		case $line in
		'outcomes:') section=outcomes ;;
		'inconclusive:') section=inconclusive ;;
		[a-z]*) section= ;;
		'  '*)
			key=${line#  }
			key=${key%%:*}
			val=${line#*: }
			if [[ $section == inconclusive ]]; then
				why[$key]=$val
			elif [[ $section == outcomes && $val == *'|'* ]]; then
				varies[$key]=$val
			fi
			;;
		esac
	done <"$file"
fi
{
	printf '# The whole-catalog result of fixtures/targets/%s.yaml on this\n' "$target"
	printf '# project'\''s host (%s, kernel %s), from the run %s\n' "$(. /etc/os-release && echo "$PRETTY_NAME")" "$(jq -r '.host.kernel' "$rec")" "$(jq -r '.run_id' "$rec")"
	printf '# (scripts/reference-result.sh). e2e'\''s TestReferenceResults holds every run\n'
	printf '# of the target to it; `sandcheck compare --references` (make matrix)\n'
	printf '# publishes an inconclusive cell only where it says why.\n'
	printf 'schema: sandcheck.dev/reference/v1\ntarget: %s\n' "$target"
	printf '# Every criterion that does not pass.\ncriteria:\n'
	jq -r '.verdict.criteria[] | select(.status != "pass") | "  \(.id): \(.status)"' "$rec"
	printf '# Every probe whose effective outcome is not blocked ("a|b": either, by run).\noutcomes:\n'
	while read -r probe eff; do
		if [[ -n ${varies[$probe]:-} ]]; then
			echo "  $probe: ${varies[$probe]}"
		elif [[ $eff != blocked ]]; then
			echo "  $probe: $eff"
		fi
	done < <(jq -r '.verdict.results[] | "\(.probe) \(.effective)"' "$rec")
	printf '# Why each probe that may be inconclusive cannot be measured here.\ninconclusive:\n'
	while read -r probe; do
		if [[ -n ${why[$probe]:-} ]]; then
			echo "  $probe: ${why[$probe]}"
		else
			echo "  $probe: \"\""
			echo "reference-result: $target: $probe is inconclusive and nothing says why; write it in $file" >&2
		fi
	done < <({
		jq -r '.verdict.results[] | select(.effective == "inconclusive") | .probe' "$rec"
		for probe in "${!varies[@]}"; do
			[[ ${varies[$probe]} == *inconclusive* ]] && echo "$probe"
		done
	} | sort -u)
} >"$file.tmp"
mv "$file.tmp" "$file"
echo "reference-result: wrote $file" >&2
