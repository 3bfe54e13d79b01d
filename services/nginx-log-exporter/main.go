// Command nginx-log-exporter reads nginx's JSON access log, buffered through a
// FIFO (the lab's default) or a line per syslog datagram over UDP (only where
// LOG_EXPORTER_SYSLOG_ADDR is set), and exposes per-location request, latency
// and upstream timing metrics for Prometheus. stub_status has no per-location
// latency; this fills the gap.
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args, os.Getenv, os.Stdout, os.Stderr)
	stop()
	if err != nil {
		fmt.Fprintf(os.Stderr, "nginx-log-exporter: %v\n", err)
		os.Exit(1)
	}
}

// run is the whole program minus process plumbing, so tests can drive it
// with their own context, arguments, environment and output.
func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	cfg, err := loadConfig(getenv)
	if err != nil {
		return err
	}
	if len(args) > 1 {
		switch args[1] {
		case "healthcheck":
			return healthcheck(ctx, cfg, stdout)
		default:
			return fmt.Errorf("unknown subcommand %q (the only one is \"healthcheck\")", args[1])
		}
	}
	return serve(ctx, cfg, stdout, stderr)
}
