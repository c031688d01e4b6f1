package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"os"
	"os/exec"
	"os/signal"
	"slices"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/sandcheck/sandcheck/reports"
	"github.com/sandcheck/sandcheck/tracer"
)

// traceExecName is the hidden helper `sandcheck trace` starts in a new pid
// namespace: it waits for the go-ahead on fd 3, so nothing runs before the
// tracer watches the namespace, then execs the command.
const traceExecName = "__trace-exec"

func traceCmd() *cobra.Command {
	var (
		asJSON    bool
		events    int
		sensitive []string
	)
	c := &cobra.Command{
		Use:   "trace [flags] -- CMD [ARG...]",
		Short: "Trace a command from the kernel (eBPF) and print what it did",
		Long: `Trace runs CMD in a new pid namespace, watched from its first instruction
by sandcheck's eBPF tracer, and prints a summary: its processes, every syscall
with how it returned (refusals by errno), network destinations, sensitive
opens and privileged calls, and anything lost. Needs root.

Interrupting it (Ctrl-C or SIGTERM) kills the command, prints the summary of
what it did until then and exits 0; every BPF program is unloaded.`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			var prefixes []string
			if cmd.Flags().Changed("sensitive") {
				prefixes = sensitive
			}
			log := slog.New(slog.NewTextHandler(cmd.ErrOrStderr(), &slog.HandlerOptions{Level: slog.LevelWarn}))
			rep, status, dur, err := traceCommand(ctx, args, tracer.Options{Logger: log, SensitivePrefixes: prefixes})
			if err != nil {
				return harness(err)
			}
			if asJSON {
				enc := json.NewEncoder(cmd.OutOrStdout())
				enc.SetIndent("", "  ")
				return enc.Encode(rep)
			}
			printTrace(cmd.OutOrStdout(), rep, status, dur, events)
			if ctx.Err() != nil {
				fmt.Fprintf(cmd.ErrOrStderr(), "sandcheck trace: interrupted after %s; %s was killed\n", dur.Round(time.Millisecond), args[0])
			}
			return nil
		},
	}
	f := c.Flags()
	printFlag(c, &asJSON, "the full report")
	f.IntVar(&events, "events", 40, "print at most this many events")
	f.StringSliceVar(&sensitive, "sensitive", nil, "path prefixes whose opens are events (default: the tracer's list)")
	return c
}

// traceCommand runs argv watched by the tracer and returns the report, the
// command's exit status and how long it ran. When ctx ends first the command
// is killed and the report covers what it did until then: an interruption is
// not an error.
func traceCommand(ctx context.Context, argv []string, opts tracer.Options) (*tracer.Report, int, time.Duration, error) {
	tr, err := tracer.New(opts)
	if err != nil {
		return nil, 0, 0, err
	}
	defer tr.Close()
	self, err := os.Executable()
	if err != nil {
		return nil, 0, 0, fmt.Errorf("finding sandcheck's own binary: %w", err)
	}
	goR, goW, err := os.Pipe()
	if err != nil {
		return nil, 0, 0, fmt.Errorf("creating the go-ahead pipe: %w", err)
	}
	defer goW.Close()
	c := exec.Command(self, append([]string{traceExecName, "--"}, argv...)...)
	c.Stdin, c.Stdout, c.Stderr = os.Stdin, os.Stdout, os.Stderr
	c.ExtraFiles = []*os.File{goR}
	c.SysProcAttr = &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWPID, Pdeathsig: syscall.SIGKILL}
	if err := c.Start(); err != nil {
		goR.Close()
		return nil, 0, 0, fmt.Errorf("starting %s in a new pid namespace: %w", argv[0], err)
	}
	goR.Close()
	w, err := tr.Watch(c.Process.Pid, tracer.WatchOptions{SkipRunning: true})
	if err != nil {
		c.Process.Kill()
		c.Wait()
		return nil, 0, 0, err
	}
	start := time.Now()
	if _, err := goW.Write([]byte{1}); err != nil {
		c.Process.Kill()
	}
	goW.Close()
	waited := make(chan error, 1)
	go func() { waited <- c.Wait() }()
	select {
	case err = <-waited:
	case <-ctx.Done():
		c.Process.Kill()
		err = <-waited
	}
	dur := time.Since(start)
	status := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		status = ee.ExitCode()
	} else if err != nil {
		return nil, 0, dur, fmt.Errorf("running %s: %w", argv[0], err)
	}
	rep, err := w.Close()
	if err != nil {
		return nil, status, dur, err
	}
	if err := tr.Close(); err != nil {
		return nil, status, dur, err
	}
	return rep, status, dur, nil
}

// traceExecCmd is the hidden helper: wait for the go-ahead, then exec.
func traceExecCmd() *cobra.Command {
	return &cobra.Command{
		Use: traceExecName + " -- CMD [ARG...]", Hidden: true, Args: cobra.MinimumNArgs(1),
		RunE: func(_ *cobra.Command, args []string) error {
			gate := os.NewFile(3, "go-ahead")
			b := make([]byte, 1)
			if n, _ := gate.Read(b); n != 1 {
				return harness(errors.New("no go-ahead from sandcheck trace"))
			}
			gate.Close()
			path, err := exec.LookPath(args[0])
			if err != nil {
				return harness(err)
			}
			return harness(syscall.Exec(path, args, os.Environ()))
		},
	}
}

func printTrace(w io.Writer, r *tracer.Report, status int, dur time.Duration, maxEvents int) {
	sys := r.Syscalls()
	var total uint64
	for _, c := range sys {
		total += c.Calls
	}
	if status < 0 { // ended by a signal (an interrupted trace kills it)
		fmt.Fprintf(w, "command killed by a signal after %s\n", dur.Round(time.Millisecond))
	} else {
		fmt.Fprintf(w, "command exited with status %d after %s\n", status, dur.Round(time.Millisecond))
	}
	fmt.Fprintf(w, "%d process tree(s), %d syscalls (%d distinct, %.0f/s)\n", len(r.Trees), total, len(sys), float64(total)/dur.Seconds())
	names := slices.SortedFunc(func(yield func(string) bool) {
		for n := range sys {
			if !yield(n) {
				return
			}
		}
	}, func(a, b string) int {
		if sys[a].Calls != sys[b].Calls {
			return cmp.Compare(sys[b].Calls, sys[a].Calls)
		}
		return strings.Compare(a, b)
	})
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "syscall\tcalls\tok\tEPERM\tEACCES\tENOSYS\tother errors\t")
	for _, n := range names {
		c := sys[n]
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%d\t%d\t\n", n, c.Calls, c.OK, c.EPERM, c.EACCES, c.ENOSYS, c.OtherErr)
	}
	tw.Flush()
	var evs []tracer.Event
	for _, t := range r.Trees {
		evs = append(evs, t.Events...)
	}
	slices.SortFunc(evs, func(a, b tracer.Event) int { return cmp.Compare(a.Nanos, b.Nanos) })
	fmt.Fprintf(w, "%d event(s):\n", len(evs))
	for i, ev := range evs {
		if i == maxEvents {
			fmt.Fprintf(w, "  ... %d more (--events, --json)\n", len(evs)-i)
			break
		}
		fmt.Fprintf(w, "  %s\n", reports.Line(fmt.Sprint(ev)))
	}
	unitemized := map[string]uint64{}
	for _, t := range r.Trees {
		for n, c := range t.Unitemized {
			unitemized[n] += c
		}
	}
	if len(unitemized) > 0 {
		var parts []string
		for _, n := range slices.Sorted(maps.Keys(unitemized)) {
			parts = append(parts, fmt.Sprintf("%s x%d", n, unitemized[n]))
		}
		fmt.Fprintf(w, "counted without an event (past a process tree's budget of events): %s\n", strings.Join(parts, ", "))
	}
	if r.Lost.Any() {
		fmt.Fprintf(w, "LOST: %d events, %d processes, %d counts, %d capped: the report is incomplete\n", r.Lost.Events, r.Lost.Tasks, r.Lost.Counts, r.Lost.Capped)
	} else {
		fmt.Fprintln(w, "lost: none")
	}
}
