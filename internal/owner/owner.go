// Package owner names the harness process that owns a run's things on the
// host (sandboxes, run folders) so that whoever sweeps later can tell a live
// run's things from a dead one's without asking the run. An owner is
// "<boot id>/<pid>/<start time in clock ticks>": the start time guards
// against a reused pid, the boot id against a previous boot's pids.
package owner

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/sandcheck/sandcheck/internal/bounded"
)

// File, in a folder a run made (a run folder, a sandbox's state folder),
// names the folder's owner (Mark).
const File = ".sandcheck-owner"

// Mark records in dir that this process owns it, so that a sweep, the run's
// reaper's included, knows at once when the process is gone.
func Mark(dir string) error {
	if err := os.WriteFile(filepath.Join(dir, File), []byte(Self()+"\n"), 0o600); err != nil {
		return fmt.Errorf("marking folder %s: %w", dir, err)
	}
	return nil
}

// Self is this process's owner string.
func Self() string {
	pid := os.Getpid()
	return fmt.Sprintf("%s/%d/%s", BootID(), pid, startTicks(pid))
}

// BootID is this boot's id (/proc/sys/kernel/random/boot_id).
func BootID() string {
	return strings.TrimSpace(string(bounded.ReadFile("/proc/sys/kernel/random/boot_id", 64)))
}

// Alive reports whether an owner string names a live process on this boot.
// known is false when the owner cannot be judged from here (a malformed
// string, or one written on another machine); another boot's process is
// known dead. A process that has exited but not yet been reaped by its
// parent (a zombie, or one still closing its files) is dead: it holds
// nothing and will do nothing more.
func Alive(owner string) (alive, known bool) {
	parts := strings.Split(owner, "/")
	if len(parts) != 3 {
		return false, false
	}
	if parts[0] != BootID() {
		return false, true
	}
	pid, err := strconv.Atoi(parts[1])
	if err != nil || pid <= 0 {
		return false, false
	}
	state, ticks := stat(pid)
	return ticks != "" && ticks == parts[2] && state != "Z" && state != "X", true
}

// startTicks is field 22 of /proc/PID/stat, the process's start time since
// boot, or "" when the process is gone.
func startTicks(pid int) string {
	_, t := stat(pid)
	return t
}

// stat reads fields 3 (state) and 22 (start time) of /proc/PID/stat; both
// are "" when the process is gone.
func stat(pid int) (state, ticks string) {
	b := bounded.ReadFile(fmt.Sprintf("/proc/%d/stat", pid), 4096)
	// The command name (field 2) may hold spaces and parentheses: count from
	// the last ')'.
	i := strings.LastIndexByte(string(b), ')')
	if i < 0 {
		return "", ""
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 20 {
		return "", ""
	}
	return f[0], f[19]
}
