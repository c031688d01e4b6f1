package impl

import (
	"context"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/sandcheck/sandcheck/probes"
)

func init() {
	register(map[string]Func{"persistence.inputs-writable": inputsWritable})
}

// inputsWritable tries to add a file named with the probe's token to the
// inputs folder (left there: the host looks for it after the run, and the
// run folder holding the inputs goes with the run) and opens an existing
// input for writing without writing, so the inputs other probes read stay as
// the harness planted them.
func inputsWritable(_ context.Context, p probes.Params) probes.Result {
	e := ev{}
	if p.InputsDir == "" {
		return result(probes.NotApplicable, "the target declares no inputs folder", e)
	}
	dfd, err := unix.Open(p.InputsDir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		e.setErr("open_", err)
		return inconclusive("the inputs folder cannot be opened", e)
	}
	defer unix.Close(dfd)
	name := probes.InputsWritePrefix + p.Token
	fd, cerr := unix.Openat(dfd, name, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o644)
	if cerr == nil {
		_, werr := unix.Write(fd, []byte(p.Token+"\n"))
		unix.Close(fd)
		e.setErr("write_", werr)
		e.set("created", filepath.Join(p.InputsDir, name))
	} else {
		e.setErr("create_", cerr)
	}
	// An existing input opened for writing (never written, never truncated).
	if names, err := listNoFollow(p.InputsDir, false); err == nil {
		for _, n := range names {
			if strings.HasPrefix(n, probes.InputsWritePrefix) {
				continue
			}
			fd, err := unix.Openat(dfd, n, unix.O_WRONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
			if err == nil {
				unix.Close(fd)
				e.set("existing_opened_for_write", n)
			} else {
				e.setErr("existing_", err)
			}
			break
		}
	}
	if cerr == nil {
		return escaped("the task added a file to its inputs folder "+p.InputsDir, e)
	}
	if n, ok := errnoOf(cerr); ok && (n == unix.EROFS || n == unix.EACCES || n == unix.EPERM) {
		return blocked("the inputs folder refused a new file: "+errnoLabel(n), e)
	}
	return inconclusive("creating a file in the inputs folder failed: "+cerr.Error(), e)
}
