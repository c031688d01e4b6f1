#!/usr/bin/env bash
# Tests scripts/setup.sh without touching the machine: the daemon.json merge
# (with python3, with jq only, and with neither) on temporary files, and the
# not-Debian / not-root branch through its test-only overrides. When run as
# root on Debian after setup, it also checks that a second run is silent.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source-path=SCRIPTDIR
source "$here/setup.sh"
set +e # the cases below check exit codes themselves

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
failures=0

fail() {
	printf 'FAIL: %s\n' "$*" >&2
	failures=$((failures + 1))
}

# expect_json FILE PYEXPR: PYEXPR, evaluated with d = the parsed FILE, is true.
expect_json() {
	python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); sys.exit(0 if eval(sys.argv[2]) else 1)' "$1" "$2" ||
		fail "$1: expected $2, got $(cat "$1")"
}

want_runsc='d["runtimes"]["runsc"] == {"path": "/usr/bin/runsc", "runtimeArgs": ["--network=host", "--oci-seccomp"]}'

# only_tools DIR TOOL...: a PATH directory holding just these tools, so the
# merge takes its jq or plain fallback.
only_tools() {
	local dir=$1 t
	shift
	mkdir -p "$dir"
	for t in "$@"; do
		ln -sf "$(command -v "$t")" "$dir/$t"
	done
}
only_tools "$tmp/bin-jq" jq mktemp dirname cp chmod mv mkdir cat
only_tools "$tmp/bin-plain" mktemp dirname cp chmod mv mkdir cat

# merge MODE FILE: runs merge_daemon_json in a subshell with MODE's tools.
merge() {
	case $1 in
	python) (merge_daemon_json "$2") ;;
	jq) (PATH=$tmp/bin-jq && merge_daemon_json "$2") ;;
	plain) (PATH=$tmp/bin-plain && merge_daemon_json "$2") ;;
	esac
}

modes=(python plain)
if command -v jq >/dev/null; then
	modes+=(jq)
else
	echo "test-setup: jq not installed; skipping the jq merge cases" >&2
fi

for mode in "${modes[@]}"; do
	d=$tmp/$mode
	mkdir -p "$d"

	# Absent file: created with runsc only.
	out=$(merge "$mode" "$d/etc/docker/daemon.json")
	[[ $out == created ]] || fail "$mode absent: printed '$out', want created"
	expect_json "$d/etc/docker/daemon.json" "$want_runsc"

	# Second run: unchanged, file untouched.
	before=$(stat -c %Y.%i "$d/etc/docker/daemon.json")
	sleep 1
	out=$(merge "$mode" "$d/etc/docker/daemon.json")
	[[ $out == unchanged ]] || fail "$mode again: printed '$out', want unchanged"
	[[ $(stat -c %Y.%i "$d/etc/docker/daemon.json") == "$before" ]] || fail "$mode again: file was rewritten"

	# Empty file: treated as {}.
	: >"$d/empty.json"
	out=$(merge "$mode" "$d/empty.json")
	[[ $out == added ]] || fail "$mode empty: printed '$out', want added"
	expect_json "$d/empty.json" "$want_runsc"

	[[ $mode == plain ]] && continue # the plain fallback only writes absent or empty files

	# Other settings and runtimes are kept; the original is backed up.
	cat >"$d/other.json" <<'EOF'
{"log-level": "warn", "runtimes": {"kata": {"path": "/usr/bin/kata-runtime"}}, "default-runtime": "runc"}
EOF
	chmod 600 "$d/other.json"
	out=$(merge "$mode" "$d/other.json")
	[[ $out == added ]] || fail "$mode other: printed '$out', want added"
	expect_json "$d/other.json" "$want_runsc"
	expect_json "$d/other.json" 'd["log-level"] == "warn" and d["default-runtime"] == "runc" and d["runtimes"]["kata"] == {"path": "/usr/bin/kata-runtime"}'
	[[ $(stat -c %a "$d/other.json") == 600 ]] || fail "$mode other: mode changed to $(stat -c %a "$d/other.json")"
	grep -q kata "$d/other.json.sandcheck.bak" || fail "$mode other: no backup"

	# A runsc entry with other arguments is replaced.
	echo '{"runtimes": {"runsc": {"path": "/usr/local/bin/runsc"}}}' >"$d/old.json"
	out=$(merge "$mode" "$d/old.json")
	[[ $out == updated ]] || fail "$mode old: printed '$out', want updated"
	expect_json "$d/old.json" "$want_runsc"

	# Invalid JSON: an error, and the file is left alone.
	echo '{"runtimes": ' >"$d/bad.json"
	if out=$(merge "$mode" "$d/bad.json" 2>&1); then
		fail "$mode bad: succeeded ($out)"
	fi
	[[ $(cat "$d/bad.json") == '{"runtimes": ' ]] || fail "$mode bad: file was changed"
done

# The plain fallback refuses to overwrite a non-empty file.
echo '{"log-level": "warn"}' >"$tmp/plain/keep.json"
if out=$(merge plain "$tmp/plain/keep.json" 2>&1); then
	fail "plain non-empty: succeeded ($out)"
fi
[[ $out == *"by hand"* ]] || fail "plain non-empty: message does not say what to do: $out"

# Not Debian or Ubuntu, or not root: instructions on stderr, exit 2, nothing
# changed.
for case in "SANDCHECK_SETUP_OS_ID=fedora" "SANDCHECK_SETUP_OS_ID=ubuntu SANDCHECK_SETUP_UID=1000" "SANDCHECK_SETUP_OS_ID=debian SANDCHECK_SETUP_UID=1000"; do
	# shellcheck disable=SC2086 # $case holds one or two assignments
	out=$(env $case bash "$here/setup.sh" 2>&1 >/dev/null)
	rc=$?
	[[ $rc == 2 ]] || fail "$case: exit $rc, want 2"
	for want in "docker.io runsc bubblewrap busybox-static iptables ca-certificates clang llvm libbpf-dev poppler-utils" \
		'"runtimeArgs": ["--network=host", "--oci-seccomp"]' "dockerd" "tracefs"; do
		[[ $out == *"$want"* ]] || fail "$case: instructions lack '$want'"
	done
done

# The package lists: Debian adds chromium (report.html's rendering test);
# Ubuntu, whose chromium is a snap launcher, does not; others have none.
deb=$(packages_for debian | tr '\n' ' ')
ubu=$(packages_for ubuntu | tr '\n' ' ')
[[ $deb == *"docker.io runsc bubblewrap"*" chromium "* ]] || fail "debian packages: $deb"
[[ $ubu == *"docker.io runsc bubblewrap"* && $ubu != *chromium* ]] || fail "ubuntu packages: $ubu"
packages_for fedora >/dev/null 2>&1 && fail "packages_for fedora succeeded"
# A run needs neither the compiler nor the browser.
run=$(packages_for debian run | tr '\n' ' ')
[[ $run == *"docker.io runsc bubblewrap"* && $run != *chromium* && $run != *clang* ]] || fail "debian run packages: $run"

# installable keeps what apt can install and warns, with the way to get it,
# about what it cannot (a fake apt-cache: runsc has no candidate).
mkdir -p "$tmp/bin-apt"
cat >"$tmp/bin-apt/apt-cache" <<'EOF'
#!/bin/sh
case $2 in
runsc) printf 'runsc:\n  Installed: (none)\n  Candidate: (none)\n' ;;
nosuch) ;;
*) printf '%s:\n  Installed: (none)\n  Candidate: 1.0-1\n' "$2" ;;
esac
EOF
chmod +x "$tmp/bin-apt/apt-cache"
out=$(PATH=$tmp/bin-apt:$PATH installable docker.io runsc nosuch bubblewrap 2>"$tmp/warn")
[[ $out == $'docker.io\nbubblewrap' ]] || fail "installable printed '$out', want docker.io and bubblewrap"
grep -q "gvisor.dev" "$tmp/warn" || fail "installable did not say how to get runsc: $(cat "$tmp/warn")"
grep -q "no nosuch package" "$tmp/warn" || fail "installable did not warn about nosuch: $(cat "$tmp/warn")"

# A Docker engine from another package (docker-ce, as GitHub's Ubuntu
# runners have) is kept: docker.io is not installed over it. Fakes: every
# other package installed, dockerd and docker on PATH, apt-get recording.
mkdir -p "$tmp/bin-ce"
printf '#!/bin/sh\ncase "$*" in *docker.io*) echo not-installed ;; *) echo installed ;; esac\n' >"$tmp/bin-ce/dpkg-query"
printf '#!/bin/sh\necho "$@" >>"%s"\n' "$tmp/apt.log" >"$tmp/bin-ce/apt-get"
printf '#!/bin/sh\nexit 0\n' >"$tmp/bin-ce/dockerd"
cp "$tmp/bin-ce/dockerd" "$tmp/bin-ce/docker"
chmod +x "$tmp/bin-ce"/*
(PATH="$tmp/bin-ce:$PATH" ensure_packages ubuntu run) || fail "ensure_packages with docker-ce failed"
[[ ! -s $tmp/apt.log ]] || fail "docker.io installed over another package's engine: apt-get $(cat "$tmp/apt.log")"
mkdir -p "$tmp/bin-none"
(PATH="$tmp/bin-none" has_docker_engine) && fail "has_docker_engine found an engine on an empty PATH"
(PATH="$tmp/bin-ce" has_docker_engine) || fail "has_docker_engine missed dockerd and docker on PATH"

# srt counts as installed only at the pinned version, with its command.
fake_srt() {
	mkdir -p "$1/node_modules/.bin" "$1/node_modules/$SRT_PACKAGE"
	printf '{\n  "name": "%s",\n  "version": "%s"\n}\n' "$SRT_PACKAGE" "$2" >"$1/node_modules/$SRT_PACKAGE/package.json"
	printf '#!/bin/sh\n' >"$1/node_modules/.bin/srt"
	chmod +x "$1/node_modules/.bin/srt"
}
fake_srt "$tmp/srt-pinned" "$SRT_VERSION"
srt_installed "$tmp/srt-pinned" || fail "srt_installed missed the pinned version"
fake_srt "$tmp/srt-old" 0.0.82
srt_installed "$tmp/srt-old" && fail "srt_installed took version 0.0.82 for $SRT_VERSION"
fake_srt "$tmp/srt-nobin" "$SRT_VERSION"
rm "$tmp/srt-nobin/node_modules/.bin/srt"
srt_installed "$tmp/srt-nobin" && fail "srt_installed without the srt command"
[[ $(packages_for debian | tr '\n' ' ') == *"firejail socat ripgrep"* ]] || fail "debian test packages lack the wrapper tools"
[[ $(packages_for debian run | tr '\n' ' ') != *firejail* ]] || fail "the run packages hold the wrapper tools (tests only)"

# On a machine setup has prepared, a second run does nothing and says nothing.
if [[ $EUID == 0 && $(. /etc/os-release && echo "$ID") == debian ]] && docker_answers; then
	out=$(bash "$here/setup.sh" 2>&1)
	rc=$?
	[[ $rc == 0 && -z $out ]] || fail "setup.sh on a prepared machine: exit $rc, output: $out"
else
	echo "test-setup: not root on Debian with a running engine; skipping the idempotency check" >&2
fi

if ((failures)); then
	echo "test-setup: $failures failure(s)" >&2
	exit 1
fi
echo "test-setup: ok"
