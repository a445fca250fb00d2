// Command emsquery is the analytics query service: a read-only GraphQL and HTTP API over the EMS
// analytics database.
package main

import (
	"context"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"time"

	"github.com/emsanalytics/emsquery/platform/config"
	"github.com/emsanalytics/emsquery/platform/heapfloor"
	"github.com/emsanalytics/emsquery/platform/otel"
)

// version is set at build time: go build -ldflags "-X main.version=1.2.3".
var version = "dev"

func main() {
	os.Exit(run())
}

func run() int {
	if len(os.Args) > 1 && os.Args[1] == "key" {
		return keyCommand(os.Args[2:], os.Stdout, os.Stderr)
	}
	envFile := flag.String("env-file", "", "read settings from this env file (default: .env in the working folder, when present); the environment wins")
	showVersion := flag.Bool("version", false, "print the version and exit")
	healthcheck := flag.Bool("healthcheck", false, "exit 0 when the service on APP__HOST:APP__PORT is ready (/v1/healthz: it answers and so does its database), 1 otherwise (for container health checks)")
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
	if *healthcheck {
		return probe(cfg)
	}
	defer heapfloor.Start(heapFloorOptions(cfg.App))()
	srv, cleanup, err := initService(cfg, otel.Service{Name: "emsquery", Version: version})
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

// probe asks a running service for /v1/healthz (readiness: a container whose database cannot
// be reached is not healthy), or /v1/ping when APP__HEALTH_CHECKS_ENABLED=false turned that
// route off; distroless images have no curl for HEALTHCHECK.
func probe(cfg *config.Config) int {
	host := cfg.App.Host
	if host == "0.0.0.0" || host == "::" || host == "" {
		host = "127.0.0.1"
	}
	path := "/v1/healthz"
	if !cfg.App.HealthChecksEnabled {
		path = "/v1/ping"
	}
	url := "http://" + net.JoinHostPort(host, strconv.Itoa(int(cfg.App.Port))) + path
	client := http.Client{Timeout: 3 * time.Second}
	resp, err := client.Get(url)
	if err != nil {
		fmt.Fprintln(os.Stderr, "emsquery: healthcheck:", err)
		return 1
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		fmt.Fprintln(os.Stderr, "emsquery: healthcheck:", url, resp.Status)
		return 1
	}
	return 0
}
