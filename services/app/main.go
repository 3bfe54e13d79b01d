// Command app is the uds-lab backend: one gin engine served on a TCP
// listener and a Unix socket at once, so nginx can be benchmarked against both.
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/gin-gonic/gin"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args, os.Getenv, os.Stdout, os.Stderr)
	stop()
	if err != nil {
		fmt.Fprintf(os.Stderr, "app: %v\n", err)
		os.Exit(1)
	}
}

// run is the whole program minus process plumbing, so tests can drive it
// with their own context, arguments, environment and output.
func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	// Release mode: no debug banner or route dump on stdout.
	gin.SetMode(gin.ReleaseMode)

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
	return serve(ctx, cfg, &Readiness{}, stdout, stderr)
}
