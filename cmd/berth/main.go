// Command berth is the gateway (berth serve) and its command line.
package main

import (
	"os"

	"berth.dev/berth/internal/cli"
)

func main() {
	os.Exit(cli.Run(os.Args[1:], cli.OSEnv()))
}
