package impl

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/sandcheck/sandcheck/probes"
)

func init() {
	register(map[string]Func{"persistence.shell-startup": shellStartup})
}

// startupFiles are the shell startup files a later shell in the box (or a
// reused home folder) would run: system-wide and per-user.
func startupFiles() []string {
	files := []string{"/etc/profile", "/etc/bash.bashrc"}
	homes := []string{"/root"}
	if h := os.Getenv("HOME"); h != "" && h != "/" {
		homes = append(homes, h)
	}
	for _, h := range homes {
		for _, f := range []string{".profile", ".bashrc", ".bash_profile"} {
			files = append(files, filepath.Join(h, f))
		}
	}
	return files
}

// shellStartup writes a comment line naming the run into each startup file
// and takes it out at once: an existing file gets the line appended and is
// cut back to its old size; a missing file (in an existing folder) is created
// and removed; a new file is created in /etc/profile.d if it exists. Any write
// that succeeds is an escape.
func shellStartup(_ context.Context, p probes.Params) probes.Result {
	e := ev{}
	token := fileSafe(p.Token)
	if token == "" {
		token = fmt.Sprint(os.Getpid())
	}
	line := []byte("# sandcheck persistence.shell-startup " + token + "\n")
	files := startupFiles()
	var st unix.Stat_t
	if unix.Stat("/etc/profile.d", &st) == nil && st.Mode&unix.S_IFMT == unix.S_IFDIR {
		files = append(files, "/etc/profile.d/sandcheck-"+token+".sh")
	}
	seen := map[string]bool{}
	var written, unknown []string
	tested := 0
	for _, path := range files {
		if seen[path] {
			continue
		}
		seen[path] = true
		state, ok, err := touchStartup(path, line)
		if state == "" {
			continue // its folder is missing: nothing to test
		}
		tested++
		e.set(pathKey(path), state)
		switch {
		case ok:
			written = append(written, path)
		case err != 0 && !refusedErrno(err):
			unknown = append(unknown, path)
		}
	}
	sort.Strings(written)
	switch {
	case len(written) > 0:
		return escaped("wrote to shell startup file(s) "+strings.Join(written, ", ")+" (the line removed again)", e)
	case tested == 0:
		return inconclusive("no shell startup file or folder exists to be tested", e)
	case len(unknown) > 0:
		return inconclusive("unexpected error writing "+strings.Join(unknown, ", "), e)
	}
	return blocked("every shell startup file refused the write", e)
}

// touchStartup writes line into path and undoes it. It returns a state for the
// evidence ("" when the file's folder is missing), whether the write
// succeeded, and the errno that refused it.
func touchStartup(path string, line []byte) (string, bool, unix.Errno) {
	var st unix.Stat_t
	if err := unix.Lstat(path, &st); err != nil {
		var dst unix.Stat_t
		if unix.Stat(filepath.Dir(path), &dst) != nil || dst.Mode&unix.S_IFMT != unix.S_IFDIR {
			return "", false, 0
		}
		fd, err := unix.Open(path, unix.O_CREAT|unix.O_EXCL|unix.O_WRONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o644)
		if err != nil {
			n, _ := errnoOf(err)
			return "create: " + errnoLabel(n), false, n
		}
		_, werr := unix.Write(fd, line)
		unix.Close(fd)
		state := "created with the line and removed"
		if uerr := unix.Unlink(path); uerr != nil {
			state = "created; remove failed: " + uerr.Error()
		}
		if werr != nil {
			n, _ := errnoOf(werr)
			return "created; write: " + errnoLabel(n), false, n
		}
		return state, true, 0
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		return "not a regular file, not tested", false, 0
	}
	fd, err := unix.Open(path, unix.O_WRONLY|unix.O_APPEND|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		n, _ := errnoOf(err)
		return "open for append: " + errnoLabel(n), false, n
	}
	defer unix.Close(fd)
	if err := unix.Fstat(fd, &st); err != nil {
		return "fstat failed, not written", false, 0
	}
	size := st.Size
	w, werr := unix.Write(fd, line)
	if w > 0 {
		if terr := unix.Ftruncate(fd, size); terr != nil {
			return "line appended; restoring the old size failed: " + terr.Error(), true, 0
		}
	}
	if werr != nil {
		n, _ := errnoOf(werr)
		return "write: " + errnoLabel(n), false, n
	}
	return "line appended and removed", true, 0
}
