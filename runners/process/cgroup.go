package process

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/sandcheck/sandcheck/targets"
)

// cgroupRoot is where the cgroup file systems are mounted.
const cgroupRoot = "/sys/fs/cgroup"

// v1Controllers are the cgroup v1 hierarchies a sandbox's cgroup spans:
// limits (pids, memory, cpu), accounting (cpuacct) and stopping every
// process at once (freezer).
var v1Controllers = []string{"pids", "memory", "cpu", "cpuacct", "freezer"}

// Bounds of killing a cgroup's processes and removing its folders.
const (
	killRounds   = 50
	killPause    = 20 * time.Millisecond
	removeGrace  = 5 * time.Second
	maxCgroupTxt = 1 << 20
)

// Cgroup is the cgroup a runner makes for one sandbox: a child of the
// runner's own cgroup in each hierarchy (so limits set above the runner
// still apply), holding every process of the sandbox. On cgroup v1 it spans
// the pids, memory, cpu, cpuacct and freezer hierarchies; on v2 it is one
// folder.
type Cgroup struct {
	// dirs are the cgroup's folders, by controller ("" on v2).
	dirs map[string]string
	// made are every folder created, kept for Leftovers after Remove.
	made []string
	v2   bool
}

// NewCgroup creates the cgroup named name (a folder name, unique on the
// host) and sets the limits. On error it removes what it made.
func NewCgroup(name string, l targets.Limits) (cg *Cgroup, err error) {
	if name == "" || strings.ContainsAny(name, "/.") {
		return nil, fmt.Errorf("creating cgroup: bad name %q", name)
	}
	cg, err = cgroupNamed(name)
	if err != nil {
		return nil, fmt.Errorf("creating cgroup: %w", err)
	}
	defer func() {
		if err != nil {
			err = errors.Join(err, cg.Remove())
			cg = nil
		}
	}()
	for _, c := range cg.controllers() {
		if err := os.Mkdir(cg.dirs[c], 0o755); err != nil {
			delete(cg.dirs, c)
			return cg, fmt.Errorf("creating cgroup: %w", err)
		}
		cg.made = append(cg.made, cg.dirs[c])
	}
	return cg, cg.setLimits(l)
}

// OpenCgroup is the cgroup named name as NewCgroup would make it beside
// this process's, for removing one a dead run left: only its folders that
// exist are held (none: nothing to remove), and nothing is created.
func OpenCgroup(name string) (*Cgroup, error) {
	if name == "" || strings.ContainsAny(name, "/.") {
		return nil, fmt.Errorf("opening cgroup: bad name %q", name)
	}
	cg, err := cgroupNamed(name)
	if err != nil {
		return nil, fmt.Errorf("opening cgroup %s: %w", name, err)
	}
	for c, d := range cg.dirs {
		if fi, err := os.Lstat(d); err != nil || !fi.IsDir() {
			delete(cg.dirs, c)
			continue
		}
		cg.made = append(cg.made, d)
	}
	return cg, nil
}

// cgroupFile, in a sandbox's state folder, lists its cgroup's folders, one
// a line (Record): a sweep from another cgroup (the run's reaper, which
// leaves the run's, or sandcheck cleanup from another shell) finds them
// there, not beside its own.
const cgroupFile = ".sandcheck-cgroup"

// Record writes the cgroup's folders to the state folder state.
func (cg *Cgroup) Record(state string) error {
	var b strings.Builder
	for _, c := range cg.controllers() {
		if d, ok := cg.dirs[c]; ok {
			fmt.Fprintf(&b, "%s\t%s\n", c, d)
		}
	}
	if err := os.WriteFile(filepath.Join(state, cgroupFile), []byte(b.String()), 0o600); err != nil {
		return fmt.Errorf("recording the sandbox's cgroup: %w", err)
	}
	return nil
}

// OpenRecordedCgroup is the cgroup named name whose folders the state
// folder state records (Record), or, with no record, OpenCgroup's. Only a
// folder under the cgroup mounts named name is taken from the record.
func OpenRecordedCgroup(name, state string) (*Cgroup, error) {
	b, err := os.ReadFile(filepath.Join(state, cgroupFile))
	if err != nil || len(b) > maxCgroupTxt {
		return OpenCgroup(name)
	}
	if name == "" || strings.ContainsAny(name, "/.") {
		return nil, fmt.Errorf("opening cgroup: bad name %q", name)
	}
	cg := &Cgroup{dirs: map[string]string{}}
	if _, err := os.Stat(filepath.Join(cgroupRoot, "cgroup.controllers")); err == nil {
		cg.v2 = true
	}
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		c, d, ok := strings.Cut(line, "\t")
		if !ok || filepath.Clean(d) != d || filepath.Base(d) != name || !strings.HasPrefix(d, cgroupRoot+"/") ||
			(c != "" && !strings.HasPrefix(d, filepath.Join(cgroupRoot, c)+"/")) {
			return nil, fmt.Errorf("opening cgroup %s: %s records %q, not a cgroup of that name", name, cgroupFile, line)
		}
		if fi, err := os.Lstat(d); err == nil && fi.IsDir() {
			cg.dirs[c] = d
			cg.made = append(cg.made, d)
		}
	}
	return cg, nil
}

// cgroupNamed is the cgroup named name beside this process's own: its
// folder per controller (one on v2), not yet made.
func cgroupNamed(name string) (*Cgroup, error) {
	own, err := ownCgroups()
	if err != nil {
		return nil, err
	}
	cg := &Cgroup{dirs: map[string]string{}}
	if _, err := os.Stat(filepath.Join(cgroupRoot, "cgroup.controllers")); err == nil {
		cg.v2 = true
		cg.dirs[""] = filepath.Join(cgroupRoot, own[""], name)
		return cg, nil
	}
	for _, c := range v1Controllers {
		p, ok := own[c]
		if !ok {
			return nil, fmt.Errorf("this host has no cgroup v1 %s hierarchy", c)
		}
		cg.dirs[c] = filepath.Join(cgroupRoot, c, p, name)
	}
	return cg, nil
}

func (cg *Cgroup) controllers() []string {
	if cg.v2 {
		return []string{""}
	}
	return v1Controllers
}

// ownCgroups reads this process's cgroup paths, by controller ("" for v2).
func ownCgroups() (map[string]string, error) {
	b, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return nil, fmt.Errorf("reading this process's cgroups: %w", err)
	}
	out := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 {
			continue
		}
		for _, c := range strings.Split(parts[1], ",") {
			out[c] = parts[2]
		}
	}
	return out, nil
}

func (cg *Cgroup) write(controller, file, val string) error {
	p := filepath.Join(cg.dirs[controller], file)
	if err := os.WriteFile(p, []byte(val), 0o644); err != nil {
		return fmt.Errorf("setting %s to %s: %w", p, val, err)
	}
	return nil
}

func (cg *Cgroup) setLimits(l targets.Limits) error {
	pidsC, memC, cpuC := "pids", "memory", "cpu"
	if cg.v2 {
		pidsC, memC, cpuC = "", "", ""
	}
	if l.PidsLimit > 0 {
		if err := cg.write(pidsC, "pids.max", strconv.FormatInt(l.PidsLimit, 10)); err != nil {
			return err
		}
	}
	if l.Memory != "" {
		n, err := targets.ParseSize(l.Memory)
		if err != nil {
			return fmt.Errorf("memory limit: %w", err)
		}
		file := "memory.limit_in_bytes"
		if cg.v2 {
			file = "memory.max"
		}
		if err := cg.write(memC, file, strconv.FormatInt(n, 10)); err != nil {
			return err
		}
		if !cg.v2 {
			// Swap counts too, so the limit cannot be dodged by swapping
			// (absent when the kernel does not account swap).
			sw := filepath.Join(cg.dirs[memC], "memory.memsw.limit_in_bytes")
			if _, err := os.Stat(sw); err == nil {
				if err := cg.write(memC, "memory.memsw.limit_in_bytes", strconv.FormatInt(n, 10)); err != nil {
					return err
				}
			}
		} else if err := cg.write(memC, "memory.swap.max", "0"); err != nil {
			return err
		}
	}
	if l.CPUs > 0 {
		const period = 100000
		quota := int64(l.CPUs * period)
		if cg.v2 {
			return cg.write(cpuC, "cpu.max", fmt.Sprintf("%d %d", quota, period))
		}
		if err := cg.write(cpuC, "cpu.cfs_period_us", strconv.Itoa(period)); err != nil {
			return err
		}
		return cg.write(cpuC, "cpu.cfs_quota_us", strconv.FormatInt(quota, 10))
	}
	return nil
}

// ProcsFiles are the cgroup.procs files a process writes its pid into to
// join the cgroup (each hierarchy's, on v1).
func (cg *Cgroup) ProcsFiles() []string {
	var out []string
	for _, c := range cg.controllers() {
		if d, ok := cg.dirs[c]; ok {
			out = append(out, filepath.Join(d, "cgroup.procs"))
		}
	}
	return out
}

// JoinScript is a POSIX shell prelude that moves the shell into the cgroup
// (exit code 125 when it cannot), so that the command it then execs, and
// everything that forks from it, starts inside.
func (cg *Cgroup) JoinScript() string {
	var b strings.Builder
	for _, f := range cg.ProcsFiles() {
		fmt.Fprintf(&b, "echo $$ > %s || exit 125; ", f)
	}
	return b.String()
}

// Paths are the cgroup's folders.
func (cg *Cgroup) Paths() []string {
	var out []string
	for _, c := range cg.controllers() {
		if d, ok := cg.dirs[c]; ok {
			out = append(out, d)
		}
	}
	return out
}

// Procs lists the processes in the cgroup (from the pids hierarchy on v1).
func (cg *Cgroup) Procs() ([]int, error) {
	c := "pids"
	if cg.v2 {
		c = ""
	}
	d, ok := cg.dirs[c]
	if !ok {
		return nil, nil
	}
	f, err := os.Open(filepath.Join(d, "cgroup.procs"))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("listing the cgroup's processes: %w", err)
	}
	defer f.Close()
	var out []int
	sc := bufio.NewScanner(io.LimitReader(f, maxCgroupTxt))
	for sc.Scan() {
		if pid, err := strconv.Atoi(strings.TrimSpace(sc.Text())); err == nil {
			out = append(out, pid)
		}
	}
	return out, sc.Err()
}

// CPUUsed is the CPU time the cgroup's processes have used.
func (cg *Cgroup) CPUUsed() (time.Duration, error) {
	if cg.v2 {
		b, err := os.ReadFile(filepath.Join(cg.dirs[""], "cpu.stat"))
		if err != nil {
			return 0, fmt.Errorf("reading cpu.stat: %w", err)
		}
		for _, line := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(line, "usage_usec "); ok {
				n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
				return time.Duration(n) * time.Microsecond, err
			}
		}
		return 0, errors.New("cpu.stat has no usage_usec")
	}
	b, err := os.ReadFile(filepath.Join(cg.dirs["cpuacct"], "cpuacct.usage"))
	if err != nil {
		return 0, fmt.Errorf("reading cpuacct.usage: %w", err)
	}
	n, err := strconv.ParseInt(string(bytes.TrimSpace(b)), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("reading cpuacct.usage: %w", err)
	}
	return time.Duration(n), nil
}

// Kill stops every process in the cgroup: frozen first (so a fork bomb
// cannot outrun it), killed, thawed so the kills land, until the cgroup is
// empty or a bounded number of rounds has passed.
func (cg *Cgroup) Kill() error {
	for range killRounds {
		pids, err := cg.Procs()
		if err != nil {
			return err
		}
		if len(pids) == 0 {
			return nil
		}
		cg.freeze(true)
		for _, pid := range pids {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		cg.freeze(false)
		time.Sleep(killPause)
	}
	pids, _ := cg.Procs()
	if len(pids) > 0 {
		return fmt.Errorf("killing the cgroup's processes: %d survive (%v)", len(pids), pids)
	}
	return nil
}

// freeze freezes or thaws the cgroup; best effort (killing works without).
func (cg *Cgroup) freeze(on bool) {
	if cg.v2 {
		v := "0"
		if on {
			v = "1"
		}
		_ = cg.write("", "cgroup.freeze", v)
		return
	}
	if _, ok := cg.dirs["freezer"]; !ok {
		return
	}
	v := "THAWED"
	if on {
		v = "FROZEN"
	}
	_ = cg.write("freezer", "freezer.state", v)
}

// Remove kills what is left in the cgroup and removes its folders. A
// cgroup already removed is fine; calling it twice is safe.
func (cg *Cgroup) Remove() error {
	if cg == nil {
		return nil
	}
	kerr := cg.Kill()
	var errs []error
	for _, c := range cg.controllers() {
		d, ok := cg.dirs[c]
		if !ok {
			continue
		}
		// A killed process leaves its cgroup a moment after it is reaped.
		var err error
		for deadline := time.Now().Add(removeGrace); ; time.Sleep(killPause) {
			err = os.Remove(d)
			if err == nil || errors.Is(err, os.ErrNotExist) || time.Now().After(deadline) {
				break
			}
		}
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, fmt.Errorf("removing cgroup %s: %w", d, err))
			continue
		}
		delete(cg.dirs, c)
	}
	if len(errs) > 0 {
		return errors.Join(append(errs, kerr)...)
	}
	return nil
}

// Leftovers lists the cgroup's folders that still exist.
func (cg *Cgroup) Leftovers() []string {
	var out []string
	for _, d := range cg.made {
		if _, err := os.Stat(d); err == nil {
			out = append(out, "cgroup "+d+" still exists")
		}
	}
	return out
}
