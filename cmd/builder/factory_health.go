package main

import (
	"context"
	"fmt"
	"time"

	"github.com/nodeforge/builder/factory/server"
	"github.com/spf13/cobra"
)

func newFactoryHealthCmd() *cobra.Command {
	o := server.ProbeOptions{URL: "http://127.0.0.1:8080/readyz"}
	timeout := 10 * time.Second
	cmd := &cobra.Command{
		Use:   "health [--url URL] [--insecure-skip-verify] [--timeout D]",
		Short: "Ask a running factory whether it is ready: the health check of its container image",
		Long: `health asks a factory's /readyz (or the --url given) and prints its answer: exit
status 0 when it answered 200, 1 otherwise (not ready, not listening, timed out).
The factory's container image runs it as its health check (the image has no
curl): docker ps shows the container healthy once the factory serves a release
and has every tool a request can need. With TLS (tls-cert, tls-key) give
--url https://127.0.0.1:8080/readyz --insecure-skip-verify: the certificate names
the service, not 127.0.0.1.`,
		Example: `  builder factory health
  builder factory health --url http://127.0.0.1:8080/healthz`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx, cancel := context.WithTimeout(cmd.Context(), timeout)
			defer cancel()
			body, err := server.Probe(ctx, o)
			if err != nil {
				return err
			}
			fmt.Fprint(cmd.OutOrStdout(), body)
			return nil
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&o.URL, "url", o.URL, "the endpoint to ask")
	fl.BoolVar(&o.InsecureSkipVerify, "insecure-skip-verify", false, "accept any TLS certificate (a probe from inside the container)")
	fl.DurationVar(&timeout, "timeout", timeout, "how long to wait for the answer")
	return cmd
}
