package main

import (
	"context"
	"flag"
	"fmt"
	"io"

	"refuel/internal/cluster"
	"refuel/workflows"
)

func runSetup(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("setup", flag.ContinueOnError)
	fs.SetOutput(stderr)
	conn := addConnFlags(fs)
	if _, err := parse(fs, args); err != nil {
		return err
	}
	ctx := context.Background()
	c, err := conn.dial(ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	ns := conn.resolvedNamespace()
	if err := cluster.EnsureSearchAttributes(ctx, c.OperatorService(), ns, workflows.SearchAttributeTypes); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "search attributes registered in namespace %s\n", ns)
	return nil
}
