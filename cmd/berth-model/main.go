// Command berth-model is the scripted model server (package modelserver) on
// an address, for the README's offline demo: a stand-in for the model
// vendors that real agent CLIs talk to.
//
//	berth-model [-addr 127.0.0.1:8765] [-script file.json | -scenario text|tool|error] [-vendor anthropic|openai|gemini -key-env NAME] [-pace FIRST,EVERY]
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
