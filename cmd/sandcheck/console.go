package main

import (
	"fmt"
	"io"
	"os"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sandcheck/sandcheck/engine"
	"github.com/sandcheck/sandcheck/evidence"
	"github.com/sandcheck/sandcheck/probes"
)

// console is how sandcheck's own output looks: on a terminal a line per
// probe as it finishes, coloured unless NO_COLOR is set; in a CI log plain
// lines, only for probes that did not do what the profile expects; with
// quiet nothing but the verdict and failures.
type console struct {
	w            io.Writer
	tty, color   bool
	verbose, q   bool
	lastProgress time.Time
}

func newConsole(w io.Writer, verbose, quiet bool) *console {
	c := &console{w: w, verbose: verbose, q: quiet}
	if f, ok := w.(*os.File); ok {
		_, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS)
		c.tty = err == nil
	}
	_, noColor := os.LookupEnv("NO_COLOR")
	c.color = c.tty && !noColor
	return c
}

// progress is the engine's Progress for this console.
func (c *console) progress() engine.Progress {
	return func(done, total int, res evidence.Result, elapsed time.Duration) {
		expected := res.Outcome == res.Expected
		if c.q || (!c.verbose && !c.tty && expected) {
			return
		}
		fmt.Fprintf(c.w, "[%*d/%d] %6.1fs %s %s", len(fmt.Sprint(total)), done, total, elapsed.Seconds(), c.outcome(res.Outcome, expected), res.Probe)
		if !expected {
			fmt.Fprintf(c.w, " (expected %s)", res.Expected)
		}
		fmt.Fprintln(c.w)
	}
}

// outcome is an outcome word padded to one width, green when it is what
// the profile expects and red when not, on a colour terminal.
func (c *console) outcome(o probes.Outcome, expected bool) string {
	s := fmt.Sprintf("%-14s", o)
	if !c.color {
		return s
	}
	if expected {
		return "\x1b[32m" + s + "\x1b[0m"
	}
	return "\x1b[31m" + s + "\x1b[0m"
}
