// Command emsquery is the analytics query service: a read-only GraphQL and HTTP API over the EMS
// analytics database.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/emsanalytics/emsquery/platform/config"
)

// version is set at build time: go build -ldflags "-X main.version=1.2.3".
var version = "dev"

func main() {
	os.Exit(run())
}

func run() int {
	envFile := flag.String("env-file", "", "read settings from this env file (default: .env in the working folder, when present); the environment wins")
	showVersion := flag.Bool("version", false, "print the version and exit")
	flag.Parse()
	if *showVersion {
		fmt.Println(version)
		return 0
	}

	cfg, err := config.Load(config.EnvFile(*envFile))
	if err != nil {
		fmt.Fprintln(os.Stderr, "emsquery: bad settings:", err)
		return 2
	}
	srv, cleanup, err := initService(cfg)
	if err != nil {
		fmt.Fprintln(os.Stderr, "emsquery: cannot start:", err)
		return 1
	}
	defer cleanup()

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	if err := srv.Run(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "emsquery:", err)
		return 1
	}
	return 0
}
