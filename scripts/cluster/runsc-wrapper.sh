#!/bin/bash
# The OCI runtime the runc shim runs for the gVisor RuntimeClass: runsc with
# the cluster's flags (up.sh installs this file with @RUNSC@ and @FLAGS@
# filled in). Debian's runsc ships no containerd shim, so the runc shim
# drives it, and two things differ from runc:
#
# start: `runsc start` of a pod's second container starts that container's
# gofer, which inherits runsc's stdout and stderr; the shim reads them as
# one pipe to its end, so with the pipe the gofer holds it waits forever
# (the pod stays in ContainerCreating; the shim's stack is in
# os/exec.(*Cmd).Wait under go-runc's Start). For `start` the wrapper gives
# runsc a file instead and passes on what it wrote.
#
# create: the shim watches the pid that `create` writes to its pid file and
# reports the container's exit when that process exits. runsc writes the
# sandbox's pid for every container of a pod, so the exit of a pod's task or
# sidecar container is never seen while the pod's sandbox lives: the kubelet
# keeps a dead container "running", and its stop waits on it until the CRI
# call times out (the pod and its cgroups stay). For a pod's containers
# (not its sandbox) the wrapper starts a watcher, `runsc wait` on that
# container, and writes the watcher's pid instead: the watcher is
# reparented to the shim (a subreaper), which sees the container's exit
# when the watcher exits with the container's status.
#
# kill: once a pod's sandbox has died, `runsc kill` fails with "sandbox is
# not running", which the shim takes for an unknown error (it knows runc's
# "container not running"): containerd then retries the sandbox's stop
# for ever and the pod never goes. The wrapper says it in runc's words.
runsc=@RUNSC@
flags=(@FLAGS@)

# The global flags are the arguments before the subcommand.
global=() sub=""
for a in "$@"; do
	case $a in
	create | kill | start) sub=$a; break ;;
	-*) global+=("$a") ;;
	*) [[ ${global[-1]-} == --* && ${global[-1]} != *=* ]] && global+=("$a") || break ;;
	esac
done
case $sub in
create) ;;
start)
	out=$(mktemp /tmp/sandcheck-runsc-start.XXXXXX) || exit 1
	"$runsc" "${flags[@]}" "$@" >"$out" 2>&1
	rc=$?
	cat "$out"
	rm -f "$out"
	exit "$rc"
	;;
kill)
	out=$("$runsc" "${flags[@]}" "$@" 2>&1)
	rc=$?
	if ((rc != 0)) && [[ $out == *"is not running"* ]]; then
		printf '%s (container not running)\n' "$out" >&2
	elif [[ -n $out ]]; then
		printf '%s\n' "$out" >&2
	fi
	exit "$rc"
	;;
*) exec "$runsc" "${flags[@]}" "$@" ;;
esac

"$runsc" "${flags[@]}" "$@" || exit
id=${@: -1} pidfile="" bundle=""
args=("$@")
for ((i = 0; i < $#; i++)); do
	case ${args[i]} in
	--pid-file) pidfile=${args[i + 1]} ;;
	--pid-file=*) pidfile=${args[i]#--pid-file=} ;;
	--bundle | -b) bundle=${args[i + 1]} ;;
	--bundle=*) bundle=${args[i]#--bundle=} ;;
	esac
done
[[ -n $pidfile && -n $bundle ]] || exit 0
grep -Eq '"io\.kubernetes\.cri\.container-type" *: *"container"' "$bundle/config.json" 2>/dev/null || exit 0

# The watcher: wait (at most 10 minutes) for the container to run, then for
# it to exit, and exit with its status (255 when it never ran or runsc
# cannot tell).
watch() {
	local st out code i
	for ((i = 0; i < 3000; i++)); do
		st=$("$runsc" "${flags[@]}" "${global[@]}" state "$id" 2>/dev/null) || exit 255
		case $st in
		*'"status": "running"'* | *'"status":"running"'*) break ;;
		*'"status": "created"'* | *'"status":"created"'*) sleep 0.2 ;;
		*) exit 255 ;;
		esac
	done
	((i < 3000)) || exit 255
	out=$("$runsc" "${flags[@]}" "${global[@]}" wait "$id" 2>/dev/null)
	code=$(grep -Eo '"exitStatus" *: *[0-9]+' <<<"$out" | grep -Eo '[0-9]+$')
	exit "${code:-255}"
}
watch </dev/null >/dev/null 2>&1 &
printf %s "$!" >"$pidfile.sandcheck" && mv -f "$pidfile.sandcheck" "$pidfile"
