package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strings"
	"time"

	"berth.dev/berth/internal/modelserver"
)

// run serves until ctx is done and returns the exit code: 0 after a
// signal, 1 when it cannot start, 2 for a bad command line. getenv reads
// the variable -key-env names.
func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("berth-model", flag.ContinueOnError)
	fs.SetOutput(stderr)
	addr := fs.String("addr", "127.0.0.1:8765", "address to listen on")
	file := fs.String("script", "", "JSON script file (overrides -scenario)")
	scenario := fs.String("scenario", modelserver.ScenarioTool, "ready script: text, tool or error")
	vendorName := fs.String("vendor", "", "stand in for one vendor alone: anthropic, openai or gemini (its API, paths and key header only); unset serves every dialect at any path")
	keyEnv := fs.String("key-env", "", "with -vendor: the NAME of the variable holding the key the vendor requires")
	pace := fs.String("pace", "", "FIRST,EVERY: play event streams as a model does, the first event FIRST late (200ms), each next one EVERY after it (10ms); unset sends them at once")
	if err := fs.Parse(args); errors.Is(err, flag.ErrHelp) {
		return 0
	} else if err != nil {
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "berth-model: unexpected argument %q\n", fs.Arg(0))
		return 2
	}
	var opts []modelserver.Option
	if *pace != "" {
		p, err := parsePace(*pace)
		if err != nil {
			fmt.Fprintln(stderr, "berth-model: -pace:", err)
			return 2
		}
		opts = append(opts, modelserver.WithPace(p))
	}
	switch vendor, ok := modelserver.ParseVendor(*vendorName); {
	case *vendorName == "" && *keyEnv != "":
		fmt.Fprintln(stderr, "berth-model: -key-env needs -vendor")
		return 2
	case *vendorName == "":
	case !ok:
		fmt.Fprintf(stderr, "berth-model: -vendor %q: want anthropic, openai or gemini\n", *vendorName)
		return 2
	case *keyEnv == "" || getenv(*keyEnv) == "":
		// The key by name only: never on the command line.
		fmt.Fprintln(stderr, "berth-model: -vendor needs -key-env naming a set variable that holds the key")
		return 2
	default:
		opts = append(opts, modelserver.AsVendor(vendor, getenv(*keyEnv)))
	}
	what := "scenario " + *scenario
	script, err := modelserver.Scenario(*scenario)
	if *file != "" {
		what = "script " + *file
		script, err = modelserver.LoadScript(*file)
	}
	if err != nil {
		fmt.Fprintln(stderr, "berth-model:", err)
		return 2
	}
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		fmt.Fprintln(stderr, "berth-model:", err)
		return 1
	}
	if *vendorName != "" {
		what += ", as " + *vendorName
	}
	fmt.Fprintf(stdout, "berth-model: listening on http://%s (%s)\n", ln.Addr(), what)
	srv := modelserver.New(script, append(opts, modelserver.WithLogger(slog.New(slog.NewTextHandler(stderr, nil))))...)
	if err := srv.Serve(ctx, ln); err != nil {
		fmt.Fprintln(stderr, "berth-model:", err)
		return 1
	}
	return 0
}

// parsePace reads -pace's FIRST,EVERY.
func parsePace(s string) (modelserver.Pace, error) {
	a, b, ok := strings.Cut(s, ",")
	if !ok {
		return modelserver.Pace{}, fmt.Errorf("%q: want FIRST,EVERY (200ms,10ms)", s)
	}
	first, err := time.ParseDuration(a)
	if err != nil || first < 0 {
		return modelserver.Pace{}, fmt.Errorf("%q: FIRST is not a duration", s)
	}
	every, err := time.ParseDuration(b)
	if err != nil || every < 0 {
		return modelserver.Pace{}, fmt.Errorf("%q: EVERY is not a duration", s)
	}
	return modelserver.Pace{First: first, Every: every}, nil
}
