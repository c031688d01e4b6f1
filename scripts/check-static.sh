#!/usr/bin/env bash
# check-static.sh FILE: fails when FILE is a dynamically linked ELF binary (it
# asks for a program interpreter). The probe binary runs in images without a
# libc, so it must be static. Without readelf or file, it warns and passes.
set -euo pipefail

f=${1:?usage: check-static.sh FILE}
if command -v readelf >/dev/null; then
	if LC_ALL=C readelf -lW "$f" | grep -q 'Requesting program interpreter'; then
		echo "check-static: $f is dynamically linked (it asks for a program interpreter)" >&2
		exit 1
	fi
elif command -v file >/dev/null; then
	if ! LC_ALL=C file -L "$f" | grep -q 'statically linked'; then
		echo "check-static: $f is not statically linked: $(file -L "$f")" >&2
		exit 1
	fi
else
	echo "check-static: neither readelf nor file is installed; not checking $f" >&2
fi
