package main

import (
	"errors"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/sandcheck/sandcheck/runners"
	"github.com/sandcheck/sandcheck/runners/docker"
)

func cleanupCmd() *cobra.Command {
	var opts docker.SweepOptions
	var quiet bool
	c := &cobra.Command{
		Use:   "cleanup",
		Short: "Remove what killed runs left behind (sandboxes, networks, rules, run folders)",
		Long: `Cleanup removes what runs that died left on this host, found by sandcheck's
own labels and names only: sandboxes whose harness process is gone or whose
deadline passed (with their runtime processes), objects a teardown probe made
for such runs, run folders no live process holds (with their honey
credentials, mounts and loop devices), harness networks, bridges and
iptables/ip6tables rules no live run holds, and what the host-process
runners' sandboxes of dead runs left (the wrapper runner's folders, probe
mounts, cgroups and the processes still in them). A live run's things are left
alone. Every run does the same when it starts, and a run's own reaper does it
for that run alone the moment the run's process dies; cleanup is for what
nobody reaped (a reaper killed too, a reboot). It is safe to run at any time,
from a systemd timer or as a CI job's last step (docs/usage.md). Exit 2 when
something could not be removed.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			removed, kept, err := docker.Sweep(cmd.Context(), opts)
			r, k, rerr := runners.Sweep(cmd.Context(), opts.Owner)
			removed, kept, err = append(removed, r...), append(kept, k...), errors.Join(err, rerr)
			for _, r := range removed {
				fmt.Fprintf(cmd.OutOrStdout(), "removed %s\n", r)
			}
			if !quiet {
				for _, k := range kept {
					fmt.Fprintf(cmd.OutOrStdout(), "kept %s\n", k)
				}
			}
			if err != nil {
				return harness(fmt.Errorf("cleanup: %w", err))
			}
			fmt.Fprintf(cmd.OutOrStdout(), "cleanup: removed %d, kept %d live\n", len(removed), len(kept))
			return nil
		},
	}
	c.AddCommand(reapCmd())
	c.Flags().DurationVar(&opts.LockWait, "lock-wait", 5*time.Second, "how long to wait for a live run's harness lock before leaving its network alone")
	c.Flags().BoolVarP(&quiet, "quiet", "q", false, "do not list what was kept")
	return c
}
