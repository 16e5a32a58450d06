// Command berth is the gateway (berth serve) and its command line.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"berth.dev/berth/internal/cli"
)

func main() {
	ctx, cancel := context.WithCancel(context.Background())
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	go func() {
		// The first signal asks for a graceful stop (`berth serve` lets
		// what is in flight finish); a second one exits at once, leaving
		// what a crash leaves.
		<-sigs
		cancel()
		sig := <-sigs
		fmt.Fprintf(os.Stderr, "berth: %v again: exiting at once\n", sig)
		code := 130 // SIGINT's exit status in a shell
		if sig == syscall.SIGTERM {
			code = 143
		}
		os.Exit(code)
	}()
	code := cli.Main(ctx, os.Args[1:], cli.OSEnv())
	signal.Stop(sigs)
	cancel()
	os.Exit(code)
}
