package impl

import (
	"fmt"
	"os"
	"strconv"

	"golang.org/x/sys/unix"
)

// selfExe is how a probe re-executes the probe binary for a child helper.
const selfExe = "/proc/self/exe"

// childFD is the descriptor on which a child reports to its parent (the
// first of os.ProcAttr's extra files).
const childFD = 3

// childEnv is the whole environment of a child helper. One P and no GC keep a
// Go child at the fewest threads (a pids cgroup counts threads) and its memory
// use to what it does itself; the box's environment is not passed on, it
// holds nothing a child needs.
func childEnv() []string {
	return []string{"GOMAXPROCS=1", "GOGC=off", "GOTRACEBACK=none"}
}

// Child runs the internal helper named by args[0] and returns the exit code
// for the process. The helpers are re-executed by probes that need a process
// of their own; they are not probes and print nothing on stdout or stderr.
//
//	noop                         exit 0 at once (user namespace probe)
//	memhog <bound-MiB> <chunk-MiB>  touch memory, report progress (memory probe)
func Child(args []string) int {
	if len(args) == 0 {
		return 2
	}
	switch args[0] {
	case "noop":
		return 0
	case "memhog":
		return childMemhog(args[1:])
	}
	if f, ok := childKinds[args[0]]; ok {
		return f(args[1:])
	}
	return 2
}

// childKinds are helpers that later family files add from init.
var childKinds = map[string]func(args []string) int{}

// registerChild adds child helpers to childKinds; a duplicate name is a
// build defect.
func registerChild(m map[string]func(args []string) int) {
	for name, f := range m {
		if _, dup := childKinds[name]; dup || name == "noop" || name == "memhog" {
			panic("child helper " + name + " registered twice")
		}
		childKinds[name] = f
	}
}

// childMemhog maps anonymous memory in chunks and writes to every page, so the
// memory is really charged, reporting "at <MiB>" after each chunk, then
// "done <MiB>" at the bound or "err <errno> <MiB>" when a mapping is refused.
// It raises its own OOM score first so that, if the kernel must kill, it picks
// this child and not the box's init or the parent probe.
func childMemhog(args []string) int {
	bound, err1 := intArg(args, 0)
	chunk, err2 := intArg(args, 1)
	if err1 != nil || err2 != nil || chunk <= 0 {
		return 2
	}
	out := os.NewFile(childFD, "progress")
	if fd, err := unix.Open("/proc/self/oom_score_adj", unix.O_WRONLY|unix.O_CLOEXEC, 0); err == nil {
		unix.Write(fd, []byte("1000"))
		unix.Close(fd)
	}
	total := 0
	for total < bound {
		b, err := unix.Mmap(-1, 0, chunk<<20, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
		if err != nil {
			n, _ := errnoOf(err)
			fmt.Fprintf(out, "err %s %d\n", unix.ErrnoName(n), total)
			return 3
		}
		for i := 0; i < len(b); i += os.Getpagesize() {
			b[i] = 1
		}
		total += chunk
		fmt.Fprintf(out, "at %d\n", total)
	}
	fmt.Fprintf(out, "done %d\n", total)
	return 0
}

func intArg(args []string, i int) (int, error) {
	if i >= len(args) {
		return 0, fmt.Errorf("reading child argument %d: missing", i)
	}
	n, err := strconv.Atoi(args[i])
	if err != nil {
		return 0, fmt.Errorf("reading child argument %d: %w", i, err)
	}
	return n, nil
}
