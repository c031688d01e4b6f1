#!/usr/bin/env bash
# Prepares a Debian 12 or Ubuntu (22.04, 24.04: GitHub's runners) machine to
# run sandcheck and its end-to-end tests: the Docker engine with gVisor (runsc)
# registered, bubblewrap, a static busybox for the runner image, iptables with
# Docker's DOCKER-USER chain, tracefs for the eBPF tracer, clang/llvm/libbpf to
# build BPF objects, and (Debian) chromium, which renders report.html in the
# reports' tests.
#
# Idempotent: silent when everything is in place, otherwise one line per action
# taken. On other systems, or when not root, it prints what to do by hand and
# exits 2. On Ubuntu, a package the release does not carry (runsc on some
# releases; chromium, which Ubuntu ships only as a snap) is skipped with a
# warning that says how to get it.
#
# The functions can be sourced for testing (scripts/test-setup.sh does).
# Test-only overrides, never needed in normal use:
#   SANDCHECK_SETUP_OS_ID  replaces ID= from /etc/os-release
#   SANDCHECK_SETUP_UID    replaces the effective uid
set -euo pipefail

# What a run needs (`setup.sh --run`, make run), then what only the tests
# and the BPF build add (the default, make test).
readonly RUN_PACKAGES=(docker.io runsc bubblewrap busybox-static iptables ca-certificates)
# firejail, socat and ripgrep: the wrapper references (firejail itself; socat
# and ripgrep are what srt needs at run time).
readonly TEST_PACKAGES=(clang llvm libbpf-dev poppler-utils firejail socat ripgrep)
readonly PACKAGES=("${RUN_PACKAGES[@]}" "${TEST_PACKAGES[@]}")
# Debian only, tests only: Ubuntu's chromium package is a snap launcher,
# which does not run in containers or CI (GitHub's Ubuntu runners have
# google-chrome, which the reports' test uses instead).
readonly DEBIAN_EXTRA=(chromium)
readonly DAEMON_JSON=/etc/docker/daemon.json
# Anthropic's sandbox runtime (srt), the wrapper references' main subject,
# installed from the npm registry as users install it, pinned exactly.
readonly SRT_PACKAGE=@anthropic-ai/sandbox-runtime
readonly SRT_VERSION=0.0.83
readonly SRT_PREFIX=/opt/sandcheck/srt
# Debian's runsc (2022) needs the host network stack (its netstack fails on
# recent kernels) and --oci-seccomp to apply the container's seccomp profile.
readonly RUNSC_JSON='{"path": "/usr/bin/runsc", "runtimeArgs": ["--network=host", "--oci-seccomp"]}'
readonly DOCKERD_LOG=/var/log/sandcheck-dockerd.log
readonly DOCKERD_PIDFILE=/var/run/docker.pid
readonly WAIT_SECONDS=60

say() { printf 'setup: %s\n' "$*"; }
warn() { printf 'setup: warning: %s\n' "$*" >&2; }
die() {
	printf 'setup: error: %s\n' "$*" >&2
	exit 1
}

# manual_instructions prints what setup would have done, for machines it does
# not manage.
manual_instructions() {
	cat >&2 <<EOF
setup: this script manages Debian and Ubuntu as root only (found ID=$1, uid $2). Do this by hand:

1. Install (Debian/Ubuntu names; use your distribution's equivalents):
     ${PACKAGES[*]}
   e.g.  sudo apt-get update && sudo apt-get install -y ${PACKAGES[*]}

2. Register gVisor with Docker: merge this into /etc/docker/daemon.json
   (keep your other settings):
     {"runtimes": {"runsc": $RUNSC_JSON}}

3. Start (or restart) the Docker engine and wait until 'docker info' answers:
     with systemd:     sudo systemctl restart docker
     without systemd:  sudo setsid -f dockerd >$DOCKERD_LOG 2>&1 </dev/null

4. Mount tracefs for the eBPF tracer if /sys/kernel/tracing is empty:
     sudo mount -t tracefs tracefs /sys/kernel/tracing

5. Check that the DOCKER-USER chain exists: sudo iptables -n -L DOCKER-USER

6. For the wrapper tests, the pinned sandbox runtime (srt):
     sudo npm install --prefix $SRT_PREFIX $SRT_PACKAGE@$SRT_VERSION

Then run 'make images', and 'go run ./cmd/sandcheck doctor' to check the result.
EOF
	exit 2
}

has_systemd() { [[ -d /run/systemd/system ]]; }

# has_docker_engine: dockerd and the docker CLI are installed, by whatever
# package.
has_docker_engine() { command -v dockerd >/dev/null 2>&1 && command -v docker >/dev/null 2>&1; }

# packages_for OS_ID [PURPOSE] prints the packages setup installs on that
# system for PURPOSE (run, or test: the default), one a line.
packages_for() {
	case $1 in debian | ubuntu) ;; *) return 1 ;; esac
	if [[ ${2:-test} == run ]]; then
		printf '%s\n' "${RUN_PACKAGES[@]}"
		return 0
	fi
	printf '%s\n' "${PACKAGES[@]}"
	[[ $1 == debian ]] && printf '%s\n' "${DEBIAN_EXTRA[@]}"
	return 0
}

# installable PKG... prints the packages apt has a candidate for and warns
# about each one it has none for (after apt-get update).
installable() {
	local pkg cand
	for pkg in "$@"; do
		cand=$(apt-cache policy "$pkg" 2>/dev/null | awk '$1 == "Candidate:" { print $2 }')
		if [[ -n $cand && $cand != "(none)" ]]; then
			echo "$pkg"
		else
			case $pkg in
			runsc) warn "no runsc package on this release: install gVisor from its apt repository (gvisor.dev/docs/user_guide/install), then rerun setup" ;;
			*) warn "no $pkg package on this release; skipping it" ;;
			esac
		fi
	done
}

# ensure_packages installs the packages of OS_ID that are not installed yet;
# apt-get update runs only when something is missing.
ensure_packages() {
	local os_id=${1:-debian} purpose=${2:-test} missing=() pkg status wanted
	mapfile -t wanted < <(packages_for "$os_id" "$purpose")
	for pkg in "${wanted[@]}"; do
		# A Docker engine from any package (docker-ce on GitHub's Ubuntu
		# runners, moby-engine) is used as it is: docker.io would conflict.
		if [[ $pkg == docker.io ]] && has_docker_engine; then
			continue
		fi
		status=$(dpkg-query -W -f='${db:Status-Status}' "$pkg" 2>/dev/null || true)
		[[ $status == installed ]] || missing+=("$pkg")
	done
	((${#missing[@]} == 0)) && return 0

	export DEBIAN_FRONTEND=noninteractive NEEDRESTART_MODE=l NEEDRESTART_SUSPEND=1
	local log policy_rc_d=""
	log=$(mktemp /tmp/sandcheck-apt.XXXXXX)
	# Without an init system, package scripts must not try to start dockerd:
	# this script starts it itself, with its own log. policy-rc.d exit 101 is
	# Debian's documented way to say "do not start services".
	if ! has_systemd && [[ ! -e /usr/sbin/policy-rc.d ]]; then
		policy_rc_d=/usr/sbin/policy-rc.d
		printf '#!/bin/sh\nexit 101\n' >"$policy_rc_d"
		chmod 755 "$policy_rc_d"
	fi
	local ok=1
	apt-get update -qq >"$log" 2>&1 || ok=0
	if ((ok)) && [[ $os_id != debian ]]; then
		mapfile -t missing < <(installable "${missing[@]}")
	fi
	if ((ok)) && ((${#missing[@]} > 0)); then
		say "installing ${missing[*]}"
		apt-get install -y -qq -o Dpkg::Options::=--force-confdef -o Dpkg::Options::=--force-confold \
			"${missing[@]}" >>"$log" 2>&1 || ok=0
	fi
	[[ -n $policy_rc_d ]] && rm -f "$policy_rc_d"
	if ((!ok)); then
		tail -n 30 "$log" >&2
		die "apt-get failed (full log: $log)"
	fi
	rm -f "$log"
}

# AGENT_ACCOUNT is the unprivileged account the firejail user reference
# (fixtures/targets/wrapper-firejail-user.yaml) runs as: firejail starts a
# command through the user's login shell, so nobody (nologin) cannot be it.
readonly AGENT_ACCOUNT=sandcheck-agent

# ensure_agent_account creates AGENT_ACCOUNT (a system account, no home,
# /bin/sh) unless it exists. Tests only.
ensure_agent_account() {
	id "$AGENT_ACCOUNT" >/dev/null 2>&1 && return 0
	useradd --system --no-create-home --shell /bin/sh "$AGENT_ACCOUNT" ||
		die "cannot create the account $AGENT_ACCOUNT (the firejail user reference runs as it)"
	say "created the account $AGENT_ACCOUNT (the firejail user reference)"
}

# srt_installed PREFIX: the pinned srt is installed under PREFIX (its
# package.json names the pinned version; srt's own --version starts Node.js,
# which warns on Node 20, so the package file is the quieter witness).
srt_installed() {
	local prefix=${1:-$SRT_PREFIX}
	[[ -x $prefix/node_modules/.bin/srt ]] || return 1
	grep -q "\"version\": *\"$SRT_VERSION\"" "$prefix/node_modules/$SRT_PACKAGE/package.json" 2>/dev/null
}

# ensure_srt installs srt at the pinned version under SRT_PREFIX with npm,
# unless it is there already. Tests only: without npm it warns and the srt
# references skip with that reason.
ensure_srt() {
	local prefix=${1:-$SRT_PREFIX} log
	srt_installed "$prefix" && return 0
	if ! command -v npm >/dev/null 2>&1; then
		warn "npm is not installed; skipping $SRT_PACKAGE@$SRT_VERSION (the srt wrapper targets need it: apt-get install npm)"
		return 0
	fi
	log=$(mktemp /tmp/sandcheck-npm.XXXXXX)
	mkdir -p "$prefix"
	say "installing $SRT_PACKAGE@$SRT_VERSION in $prefix"
	if ! npm install --prefix "$prefix" --no-audit --no-fund --save-exact "$SRT_PACKAGE@$SRT_VERSION" >"$log" 2>&1; then
		tail -n 30 "$log" >&2
		die "npm install $SRT_PACKAGE@$SRT_VERSION failed (full log: $log)"
	fi
	rm -f "$log"
	srt_installed "$prefix" || die "npm installed $SRT_PACKAGE but $prefix/node_modules/.bin/srt is not version $SRT_VERSION"
}

# ensure_firejail_ran runs firejail once, as root, unless /run/firejail
# exists. firejail makes /run/firejail (14 entries, 3 of them bind mounts
# it keeps: dbus, firejail.ro.dir, firejail.ro.file) on its first use on a
# machine and leaves them there; when that first use is a test's, a test that
# compares the host before and after a run sees them as the run's leftovers
# on a fresh machine only. Setup makes them, before any test's snapshot.
# Tests only.
ensure_firejail_ran() {
	[[ -d /run/firejail ]] && return 0
	command -v firejail >/dev/null 2>&1 || return 0
	firejail --quiet --noprofile /bin/true </dev/null >/dev/null 2>&1 ||
		die "firejail's first run (firejail --quiet --noprofile /bin/true) failed"
	[[ -d /run/firejail ]] || die "firejail ran but made no /run/firejail"
	say "ran firejail once (it makes /run/firejail on its first use)"
}

# ensure_cgroups mounts the cgroup hierarchies when nothing has (no init
# system does it on some minimal machines).
ensure_cgroups() {
	if awk '$3 == "cgroup" || $3 == "cgroup2" { found = 1 } END { exit !found }' /proc/self/mounts; then
		return 0
	fi
	command -v cgroupfs-mount >/dev/null || die "no cgroup filesystem is mounted; mount cgroup2 on /sys/fs/cgroup"
	cgroupfs-mount
	say "mounted cgroups (cgroupfs-mount)"
}

# ensure_tracefs mounts tracefs where the eBPF tracer looks for tracepoints.
# Failure is only a warning: the tracer's tests skip without it.
ensure_tracefs() {
	[[ -d /sys/kernel/tracing/events || -d /sys/kernel/debug/tracing/events ]] && return 0
	if mount -t tracefs tracefs /sys/kernel/tracing 2>/dev/null; then
		say "mounted tracefs on /sys/kernel/tracing"
	else
		warn "could not mount tracefs on /sys/kernel/tracing; eBPF tracing will be unavailable"
	fi
}

# ensure_iptables makes sure iptables can list the filter table, falling back
# to the legacy backend when nftables does not work on this kernel. It runs
# before dockerd starts, since dockerd needs a working iptables.
ensure_iptables() {
	local err
	iptables -w 5 -n -L >/dev/null 2>&1 && return 0
	err=$(iptables -w 5 -n -L 2>&1 | head -n 1 || true)
	if command -v iptables-legacy >/dev/null && iptables-legacy -w 5 -n -L >/dev/null 2>&1; then
		update-alternatives --set iptables /usr/sbin/iptables-legacy >/dev/null
		update-alternatives --set ip6tables /usr/sbin/ip6tables-legacy >/dev/null 2>&1 || true
		say "switched iptables to the legacy backend (nftables failed: $err)"
		return 0
	fi
	die "iptables is not usable: $err"
}

# merge_daemon_json FILE makes FILE register runsc as RUNSC_JSON and keeps
# every other setting. It prints what it did: unchanged, created, added or
# updated. A changed file that existed before is backed up to FILE.sandcheck.bak.
merge_daemon_json() {
	local file=$1
	mkdir -p "$(dirname "$file")"
	if command -v python3 >/dev/null && python3 -c 'import json' 2>/dev/null; then
		python3 - "$file" "$RUNSC_JSON" <<'PY'
import json, os, sys, tempfile

path, want = sys.argv[1], json.loads(sys.argv[2])
try:
    with open(path) as f:
        text = f.read()
except FileNotFoundError:
    text = None
data = {}
if text is not None and text.strip():
    try:
        data = json.loads(text)
    except ValueError as e:
        sys.exit(f"{path} is not valid JSON ({e}); fix it by hand")
    if not isinstance(data, dict):
        sys.exit(f"{path}: the top level is not a JSON object; fix it by hand")
runtimes = data.setdefault("runtimes", {})
if not isinstance(runtimes, dict):
    sys.exit(f"{path}: \"runtimes\" is not a JSON object; fix it by hand")
old = runtimes.get("runsc")
if old == want:
    print("unchanged")
    sys.exit(0)
runtimes["runsc"] = want
mode = 0o644
if text is not None:
    mode = os.stat(path).st_mode & 0o7777
    with open(path + ".sandcheck.bak", "w") as f:
        f.write(text)
fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path) or ".", prefix=".daemon.json.")
with os.fdopen(fd, "w") as f:
    json.dump(data, f, indent=2)
    f.write("\n")
os.chmod(tmp, mode)
os.replace(tmp, path)
print("created" if text is None else "added" if old is None else "updated")
PY
	elif command -v jq >/dev/null; then
		if [[ ! -s $file ]]; then
			local action=created
			[[ -e $file ]] && action=added
			jq -n --argjson w "$RUNSC_JSON" '{runtimes: {runsc: $w}}' >"$file"
			echo "$action"
			return 0
		fi
		jq -e --argjson w "$RUNSC_JSON" '.runtimes.runsc == $w' "$file" >/dev/null 2>&1 && {
			echo unchanged
			return 0
		}
		local action=added tmp
		jq -e '.runtimes.runsc != null' "$file" >/dev/null 2>&1 && action=updated
		tmp=$(mktemp "$(dirname "$file")/.daemon.json.XXXXXX")
		jq --argjson w "$RUNSC_JSON" '.runtimes.runsc = $w' "$file" >"$tmp" ||
			{
				rm -f "$tmp"
				die "could not merge runsc into $file (not valid JSON, or runtimes is not an object); fix it by hand"
			}
		cp -p "$file" "$file.sandcheck.bak"
		chmod --reference="$file" "$tmp"
		mv "$tmp" "$file"
		echo "$action"
	else
		# Without a JSON tool, only an absent or empty file, or the exact file
		# this branch writes, can be handled safely.
		local plain action=created
		plain=$(printf '{\n  "runtimes": {\n    "runsc": %s\n  }\n}' "$RUNSC_JSON")
		if [[ -s $file ]]; then
			[[ $(cat "$file") == "$plain" ]] || die "neither python3 nor jq is available to merge runsc into $file; add {\"runtimes\": {\"runsc\": $RUNSC_JSON}} by hand"
			echo unchanged
			return 0
		fi
		[[ -e $file ]] && action=added
		printf '%s\n' "$plain" >"$file"
		echo "$action"
	fi
}

docker_answers() { timeout 10 docker info --format '{{.ServerVersion}}' >/dev/null 2>&1; }

runsc_registered() {
	timeout 10 docker info --format '{{json .Runtimes}}' 2>/dev/null | grep -q '"runsc"'
}

# dockerd_pid prints the pid of the running dockerd, from its pidfile.
dockerd_pid() {
	local pid
	pid=$(cat "$DOCKERD_PIDFILE" 2>/dev/null) || return 1
	[[ $pid =~ ^[0-9]+$ && $(cat "/proc/$pid/comm" 2>/dev/null) == dockerd ]] || return 1
	echo "$pid"
}

# wait_until CMD... retries CMD once a second for up to WAIT_SECONDS.
wait_until() {
	local i
	for ((i = 0; i < WAIT_SECONDS; i++)); do
		"$@" && return 0
		sleep 1
	done
	return 1
}

start_dockerd() {
	if has_systemd; then
		systemctl start docker
		say "started docker (systemctl)"
		return 0
	fi
	# A fresh session so dockerd outlives this script and make; a clean
	# environment so nothing of the caller's (CI variables, DOCKER_HOST) leaks
	# into the engine, except proxy settings it needs to pull.
	local env=(PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin HOME=/root)
	local v
	for v in http_proxy https_proxy no_proxy HTTP_PROXY HTTPS_PROXY NO_PROXY; do
		[[ -n ${!v:-} ]] && env+=("$v=${!v}")
	done
	setsid -f env -i "${env[@]}" dockerd </dev/null >>"$DOCKERD_LOG" 2>&1
	say "started dockerd (log: $DOCKERD_LOG)"
}

wait_for_dockerd() {
	wait_until docker_answers && return 0
	tail -n 20 "$DOCKERD_LOG" >&2 2>/dev/null || true
	die "dockerd did not answer within ${WAIT_SECONDS}s (log: $DOCKERD_LOG)"
}

# ensure_dockerd starts the engine unless it answers already. A dockerd that
# is running but not answering yet (still starting) is waited for, not
# started twice.
ensure_dockerd() {
	docker_answers && return 0
	if ! dockerd_pid >/dev/null; then
		start_dockerd
	fi
	wait_for_dockerd
}

restart_dockerd() {
	if has_systemd; then
		systemctl restart docker
		say "restarted docker (systemctl)"
		wait_for_dockerd
		return 0
	fi
	local pid
	if pid=$(dockerd_pid); then
		kill -TERM "$pid"
		wait_until bash -c "! kill -0 $pid 2>/dev/null" || die "dockerd (pid $pid) did not stop within ${WAIT_SECONDS}s"
		say "stopped dockerd (pid $pid)"
	fi
	start_dockerd
	wait_for_dockerd
}

# ensure_runsc_registered makes the running engine know runsc: dockerd reloads
# its runtimes on SIGHUP, which keeps running containers; a restart is the
# fallback.
ensure_runsc_registered() {
	runsc_registered && return 0
	local pid
	if has_systemd; then
		systemctl reload docker 2>/dev/null || true
	elif pid=$(dockerd_pid); then
		kill -HUP "$pid"
	fi
	local i
	for ((i = 0; i < 10; i++)); do
		if runsc_registered; then
			say "reloaded dockerd to register runsc"
			return 0
		fi
		sleep 1
	done
	restart_dockerd
	runsc_registered || die "dockerd does not list runsc after a restart; check $DAEMON_JSON and $DOCKERD_LOG"
}

# ensure_docker_user_chain creates DOCKER-USER the way dockerd does (a RETURN
# rule, jumped to first from FORWARD) when the engine runs without managing
# iptables; the harness network's drop rules go there.
ensure_docker_user_chain() {
	iptables -w 5 -n -L DOCKER-USER >/dev/null 2>&1 && return 0
	iptables -w 5 -N DOCKER-USER
	iptables -w 5 -A DOCKER-USER -j RETURN
	iptables -w 5 -C FORWARD -j DOCKER-USER 2>/dev/null || iptables -w 5 -I FORWARD -j DOCKER-USER
	say "created the DOCKER-USER iptables chain"
}

# main [--run]: with --run, only what a run needs (no compiler, no browser).
main() {
	local os_id uid purpose=test
	case ${1:-} in
	--run) purpose=run ;;
	"") ;;
	*) die "unknown argument $1 (usage: setup.sh [--run])" ;;
	esac
	os_id=${SANDCHECK_SETUP_OS_ID:-$(. /etc/os-release 2>/dev/null && echo "${ID:-unknown}" || echo unknown)}
	uid=${SANDCHECK_SETUP_UID:-$EUID}
	[[ ($os_id == debian || $os_id == ubuntu) && $uid == 0 ]] || manual_instructions "$os_id" "$uid"

	# CI shells and sudo may leave the sbin directories off PATH.
	export PATH=$PATH:/usr/local/sbin:/usr/sbin:/sbin

	ensure_packages "$os_id" "$purpose"
	if [[ $purpose == test ]]; then
		ensure_srt
		ensure_agent_account
		ensure_firejail_ran
	fi
	ensure_cgroups
	ensure_tracefs
	ensure_iptables

	local merged have_runsc=1
	# Ubuntu may lack a runsc package (installable warned how to get it):
	# then the engine runs without it and only the gVisor targets fail.
	[[ -x /usr/bin/runsc ]] || have_runsc=0
	if ((have_runsc)); then
		merged=$(merge_daemon_json "$DAEMON_JSON")
		[[ $merged == unchanged ]] || say "registered runsc in $DAEMON_JSON ($merged)"
	fi

	ensure_dockerd
	((have_runsc)) && ensure_runsc_registered
	ensure_docker_user_chain
}

if [[ ${BASH_SOURCE[0]} == "$0" ]]; then
	main "$@"
fi
