package bwrap

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strconv"

	"github.com/sandcheck/sandcheck/runners/process"
)

// Spawn starts argv beside the sandbox's processes and returns once it was
// started, without waiting for it: the harness's helper processes (a
// platform agent holding a token). With user "0" the helper is the host's
// root entered into every namespace of the sandbox but its user namespace
// (with one, the sandbox's user cannot touch it, as a box's user cannot
// touch a root agent of the platform); any other user runs it like an exec,
// as the sandbox's user. It joins the sandbox's cgroup, so Close kills it.
func (sb *Sandbox) Spawn(ctx context.Context, argv []string, user string, env []string) error {
	if len(argv) == 0 {
		return errors.New("spawn: empty command")
	}
	if err := sb.Running(); err != nil {
		return fmt.Errorf("spawn of %s: %w", argv[0], err)
	}
	var cmd *exec.Cmd
	if user == "0" {
		script := sb.Cgroup.JoinScript() + fmt.Sprintf(`exec nsenter -t %d --mount --pid --net --ipc --uts --cgroup --root --wd=/ -- "$@"`, sb.childPID)
		cmd = exec.Command("/bin/sh", append([]string{"-c", script, "sh"}, argv...)...)
		cmd.Env = sb.env
		cmd.Dir = "/"
	} else {
		if uid, err := strconv.Atoi(user); user != "" && (err != nil || uid != sb.r.uid) {
			return fmt.Errorf("spawn of %s: user %q is neither 0 nor the sandbox's user", argv[0], user)
		}
		var err error
		if cmd, err = sb.execCommand(argv); err != nil {
			return fmt.Errorf("spawn of %s: %w", argv[0], err)
		}
	}
	cmd.Env = append(cmd.Env, env...)
	_, err := process.StartProc(cmd)
	closeExtra(cmd)
	if err != nil {
		return fmt.Errorf("spawn of %s: %w", argv[0], err)
	}
	return nil
}
