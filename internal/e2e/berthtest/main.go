// Command berthtest is berth as the end-to-end tests run it: cmd/berth,
// whose berth serve also takes the knobs no deployment has, from the
// tests' environment: BERTH_TEST_MIN_TTL lowers the shortest sandbox
// lifetime (5m) so expiry is seen in seconds.
package main

import (
	"fmt"
	"os"
	"time"

	"berth.dev/berth/internal/cli"
	"berth.dev/berth/internal/server"
)

func main() {
	env := cli.OSEnv()
	if s := os.Getenv("BERTH_TEST_MIN_TTL"); s != "" {
		d, err := time.ParseDuration(s)
		if err != nil || d <= 0 {
			fmt.Fprintf(os.Stderr, "berthtest: BERTH_TEST_MIN_TTL %q is not a positive duration\n", s)
			os.Exit(2)
		}
		env.Serve = append(env.Serve, server.WithMinTTL(d))
	}
	os.Exit(cli.Run(os.Args[1:], env))
}
