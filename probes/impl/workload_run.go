package impl

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/sandcheck/sandcheck/probes"
)

// Running untrusted code, the workload of a high-risk-code profile: the
// task runs code it was handed (generated, never reviewed) with the
// interpreter the image carries, on scratch that may well be mounted
// noexec, as a careful box mounts it.
func init() {
	register(map[string]Func{"workload.run-generated-code": workloadRunCode})
}

// runShells are the interpreters looked for, in order.
var runShells = []string{"/bin/sh", "/usr/bin/sh"}

// runMaxOutput bounds what the generated program may print.
const runMaxOutput = 4 << 10

// runScript is the generated program: arithmetic in a loop, a pipeline
// through a second process, a file in its own folder read back, and a line
// only this invocation knows (%s, the probe's token). Its folder is $1.
const runScript = `set -eu
n=0
i=1
while [ "$i" -le 200 ]; do n=$((n + i * i)); i=$((i + 1)); done
printf '%%s\n' "$n" > "$1/sum"
w=$(printf 'alpha beta gamma\ndelta epsilon\n' | wc -w)
read -r s < "$1/sum"
echo "sum $s"
echo "words $((w))"
echo "token %s"
`

// runWant is what the program prints when it ran as written.
func runWant(token string) string {
	return "sum 2686700\nwords 5\ntoken " + token + "\n"
}

// workloadRunCode writes the generated program to a fresh folder in the
// first scratch place that takes one, runs it with the image's shell (the
// program file is the shell's input, so a noexec scratch does not stop it),
// bounded in time and output, and checks what it printed. Escaped means the
// program ran to its end and printed what it computes.
func workloadRunCode(ctx context.Context, p probes.Params) probes.Result {
	e := ev{}
	shell := ""
	for _, s := range runShells {
		if st, err := os.Stat(s); err == nil && st.Mode().IsRegular() {
			shell = s
			break
		}
	}
	if shell == "" {
		e.set("looked_for", strings.Join(runShells, ","))
		return blocked("the box has no shell to run generated code with", e)
	}
	e.set("shell", shell)
	token := fileSafe(p.Token)
	var tried []string
	dir := ""
	for _, d := range scratchDirs() {
		var err error
		if dir, err = os.MkdirTemp(d, ".sandcheck-run-"+token+"-"); err == nil {
			break
		}
		tried = append(tried, d+": "+err.Error())
	}
	e.setList("failed", tried)
	if dir == "" {
		return blocked("no scratch place (/scratch, $TMPDIR, /tmp) took a folder for the program", e)
	}
	defer os.RemoveAll(dir)
	e.set("dir", filepath.Dir(dir))
	prog := filepath.Join(dir, "task.sh")
	if err := os.WriteFile(prog, []byte(fmt.Sprintf(runScript, token)), 0o600); err != nil {
		e.setErr("write_", err)
		return blocked("the program could not be written to scratch", e)
	}
	var out bytes.Buffer
	cmd := exec.CommandContext(ctx, shell, prog, dir)
	cmd.Env = []string{"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=" + dir, "LC_ALL=C"}
	cmd.Dir = dir
	cmd.Stdout = &capped{buf: &out, max: runMaxOutput}
	cmd.Stderr = &capped{buf: &out, max: runMaxOutput}
	start := time.Now()
	err := cmd.Run()
	e.set("elapsed", time.Since(start).Round(time.Millisecond).String())
	if err != nil {
		e.setErr("run_", err)
		e.set("output", clip(out.String(), 200))
		return blocked("the generated program did not run to its end", e)
	}
	if got := out.String(); got != runWant(token) {
		e.set("output", clip(got, 200))
		return inconclusive("the generated program ran but printed something else than it computes", e)
	}
	return escaped("ran a generated shell program (a loop, a pipeline, a file in scratch) to its end with the right answer", e)
}

// capped is a writer that keeps at most max bytes and drops the rest, so a
// program that floods its output cannot grow the probe's memory.
type capped struct {
	buf *bytes.Buffer
	max int
}

func (c *capped) Write(b []byte) (int, error) {
	if room := c.max - c.buf.Len(); room > 0 {
		c.buf.Write(b[:min(len(b), room)])
	}
	return len(b), nil
}
