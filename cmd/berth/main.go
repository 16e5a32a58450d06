// Command berth is the gateway (berth serve) and its command line.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"berth.dev/berth/internal/cli"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := cli.Main(ctx, os.Args[1:], cli.OSEnv())
	stop()
	os.Exit(code)
}
