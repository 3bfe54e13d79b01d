// Command floor measures the transports under the lab's paths with nothing
// on top: a round trip of a message over one connection, and a new
// connection's connect, first exchange and close, over the Unix socket in the
// shared volume, TCP over loopback in one network namespace, and TCP across
// the Docker bridge. `floor serve` echoes; `floor bench` runs the plan
// loadgen/plan.py wrote (MODE=floor) and writes floor.json beside it.
//
// No maintained tool does this in containers with one plan for the three
// (netperf and ipc-bench are not packaged for the lab's images and measure
// one transport per run, with their own rounds); it is small on purpose: the
// frame is a 4-byte length and the bytes, echoed back whole.
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
	err := run(ctx, os.Args, os.Getenv, os.Stdout)
	stop()
	if err != nil {
		fmt.Fprintf(os.Stderr, "floor: %v\n", err)
		os.Exit(1)
	}
}

// run is the program minus process plumbing: tests drive it with their own
// context, arguments, environment and output.
func run(ctx context.Context, args []string, getenv func(string) string, stdout io.Writer) error {
	cmd := "serve"
	if len(args) > 1 {
		cmd = args[1]
	}
	switch cmd {
	case "serve":
		cfg, err := serveConfig(getenv)
		if err != nil {
			return err
		}
		return serve(ctx, cfg, stdout)
	case "bench":
		cfg, err := benchConfig(getenv)
		if err != nil {
			return err
		}
		return bench(ctx, cfg, stdout)
	case "healthcheck":
		cfg, err := serveConfig(getenv)
		if err != nil {
			return err
		}
		return healthcheck(ctx, cfg)
	default:
		return fmt.Errorf("unknown subcommand %q (serve, bench or healthcheck)", cmd)
	}
}
