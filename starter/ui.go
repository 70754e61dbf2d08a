package main

import (
	"fmt"
	"io"
	"net/url"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"refuel/internal/cluster"
	"refuel/jobs"
	"refuel/workflows"
)

func uiCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "ui [--ui URL] [--namespace NS]",
		Short: "print the Web UI's list views of refuel's state: runs by state, services, the pool",
		Long: `Prints, for each view of refuel's state, the list query (for the Web UI's
search box, a saved view, or temporal workflow list --query) and a link
that opens the Web UI's workflow list filtered by it; then the capacity
pool's page, whose current details show base and burst in use and why
each queued request waits.`,
		Example: "  starter ui\n  starter ui --ui https://temporal.example.com --namespace team-b",
		Args:    noArgs("starter ui takes no arguments"),
	}
	ui := cmd.Flags().String("ui", envOrDefault("REFUEL_UI_URL", "http://"+cluster.DefaultUIAddr), "the Web UI's address (env REFUEL_UI_URL)")
	// The namespace as every other command resolves it (flag, env, profile);
	// nothing is dialled.
	conn := addClientFlags(cmd)
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		printViews(cmd.OutOrStdout(), strings.TrimSuffix(*ui, "/"), conn.resolvedNamespace())
		return nil
	}
	return cmd
}

func printViews(w io.Writer, ui, ns string) {
	base := ui + "/namespaces/" + url.PathEscape(ns)
	for _, v := range jobs.Views {
		fmt.Fprintf(w, "%s\n  %s\n  %s/workflows?query=%s\n", v.Name, v.Query, base, url.QueryEscape(v.Query))
	}
	fmt.Fprintf(w, "the capacity pool\n  %s/workflows/%s\n", base, workflows.PoolWorkflowID)
}

func envOrDefault(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}
