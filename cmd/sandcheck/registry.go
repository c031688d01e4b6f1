package main

import (
	"fmt"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/sandcheck/sandcheck/provenance"
)

func registryCmd() *cobra.Command {
	c := &cobra.Command{
		Use:   "registry",
		Short: "A local OCI registry for first-party images (loopback only)",
	}
	var addr string
	serve := &cobra.Command{
		Use:   "serve [--addr 127.0.0.1:5000]",
		Short: "Serve an in-memory OCI registry on a loopback address until interrupted",
		Long: `Serve runs go-containerregistry's registry over plain HTTP on a loopback
address (the Docker engine pulls from loopback registries without TLS).
Content lives in memory and is gone when it stops.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			r, err := provenance.ServeRegistry(addr, cmd.ErrOrStderr())
			if err != nil {
				return harness(err)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "registry serving on %s (push to %s/NAME:TAG)\n", r.Addr, r.Addr)
			ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGINT, syscall.SIGTERM)
			defer stop()
			if err := r.Wait(ctx); err != nil {
				return harness(err)
			}
			return nil
		},
	}
	serve.Flags().StringVar(&addr, "addr", "127.0.0.1:5000", "loopback address to listen on")
	c.AddCommand(serve)
	return c
}
