package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"go.uber.org/zap"

	"refuel/internal/cluster"
	"refuel/internal/telemetry"
	"refuel/pkg/devserver"
	"refuel/workflows"
)

// temporalServer serves a Temporal cluster of its own on PostgreSQL, the
// shape of a production deployment on one machine: control-plane workers
// connect to it with TEMPORAL_ADDRESS, and it outlives them (or they it).
func temporalServer(args []string) int {
	fs := flag.NewFlagSet("temporal-server", flag.ContinueOnError)
	var (
		postgres  = fs.String("postgres", os.Getenv("REFUEL_POSTGRES"), "PostgreSQL to keep everything in: postgres://USER[:PASSWORD]@HOST:PORT/DATABASE[?sslmode=disable]; DATABASE and DATABASE_visibility are created with their schema when missing (env REFUEL_POSTGRES)")
		frontend  = fs.String("frontend", envOr("REFUEL_FRONTEND", cluster.DefaultFrontendAddr), "frontend address clients connect to (env REFUEL_FRONTEND)")
		ui        = fs.String("ui", "-", "Web UI address, - for none")
		namespace = fs.String("namespace", cluster.DefaultNamespace, "namespace to create, with refuel's search attributes")
		logLevel  = fs.String("log-level", "warn", "the server's least severe log shown: debug, info, warn or error")
	)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), "usage: worker temporal-server --postgres URL [flags]\n\nServes a Temporal cluster on PostgreSQL until SIGTERM or SIGINT.\n\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *postgres == "" {
		fmt.Fprintln(os.Stderr, "worker temporal-server: --postgres is required (or REFUEL_POSTGRES): postgres://USER@HOST:PORT/DATABASE")
		return 2
	}
	if *ui == "-" {
		*ui = ""
	}
	log, err := telemetry.NewLogger(*logLevel, false)
	if err != nil {
		fmt.Fprintf(os.Stderr, "worker temporal-server: %v\n", err)
		return 2
	}
	defer func() { _ = log.Sync() }()

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	startCtx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	srv, err := devserver.Start(startCtx, devserver.Options{
		Postgres: *postgres, FrontendAddr: *frontend, UIAddr: *ui, Namespace: *namespace,
		SearchAttributes: workflows.SearchAttributeTypes, Logger: log, LogLevel: *logLevel,
	})
	if err != nil {
		log.Error("cannot start the Temporal server", zap.Error(err))
		return 1
	}
	log.Info("Temporal server ready", zap.String("frontend", srv.FrontendAddr()), zap.String("ui", srv.UIURL()))
	<-ctx.Done()
	if err := srv.Stop(); err != nil {
		log.Error("stop", zap.Error(err))
		return 1
	}
	return 0
}
