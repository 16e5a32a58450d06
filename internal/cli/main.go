// Package cli is the berth command line: a cobra tree built by
// constructors (no package state) and the client-side configuration written
// by `berth login`. The commands that run the gateway, or work on its host
// (berth serve, berth admin, repo, image), are thin: they call server, the
// composition root.
package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"berth.dev/berth/internal/api"
	"berth.dev/berth/internal/server"
)

// Env is everything the CLI takes from its surroundings, so tests can run
// it in-process with their own.
type Env struct {
	Stdin  io.Reader
	Stdout io.Writer
	Stderr io.Writer
	Getenv func(string) string
	HTTP   *http.Client
	Now    func() time.Time
	// Exec replaces the process with another program, as
	// syscall.Exec does (berth sandbox ssh becomes ssh). When nil, the
	// program runs as a child instead, on Stdin, Stdout and Stderr.
	Exec func(argv0 string, argv, envv []string) error
	// Serve is what berth serve passes to server.Build: none in berth
	// itself; the knobs of tests that run a berth binary of their own.
	Serve []server.Option
	// ssoWait, when not 0, is how long berth login --sso waits for the
	// browser instead of ssoWait (tests: export_test.go).
	ssoWait time.Duration
	// ssoSecond, when not 0, is how long a second of berth login --sso
	// --device's grant lasts (its interval and lifetime; tests:
	// export_test.go).
	ssoSecond time.Duration
}

// OSEnv is the process's real environment.
func OSEnv() Env {
	return Env{Stdin: os.Stdin, Stdout: os.Stdout, Stderr: os.Stderr, Getenv: os.Getenv,
		HTTP: &http.Client{Timeout: 5 * time.Minute}, Now: time.Now, Exec: syscall.Exec}
}

// usageError marks a mistake in how the command was called: exit 2.
type usageError struct{ error }

// exitError carries an exit code other than 1, with nothing more to print.
type exitError struct{ code int }

func (e exitError) Error() string { return fmt.Sprintf("exit %d", e.code) }

// Run is Main as a process runs it: the first SIGINT or SIGTERM cancels
// the command's context (berth serve lets what is in flight finish); a
// second one exits at once, leaving what a crash leaves.
func Run(args []string, env Env) int {
	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(sigs)
	go func() {
		cancel(interrupted{<-sigs})
		sig := <-sigs
		fmt.Fprintf(env.Stderr, "berth: %v again: exiting at once\n", sig)
		code := 130 // SIGINT's exit status in a shell
		if sig == syscall.SIGTERM {
			code = 143
		}
		os.Exit(code)
	}()
	return Main(ctx, args, env)
}

// Main runs the berth command line and returns its exit code: 0 on
// success, 2 for a usage mistake, 1 for any other failure.
func Main(ctx context.Context, args []string, env Env) int {
	root := newRoot(env)
	root.SetArgs(args)
	root.SetIn(env.Stdin)
	root.SetOut(env.Stdout)
	root.SetErr(env.Stderr)
	err := root.ExecuteContext(ctx)
	if err == nil {
		return 0
	}
	var ee exitError
	if errors.As(err, &ee) {
		return ee.code
	}
	if ctx.Err() != nil && (errors.Is(err, context.Canceled) || errors.Is(err, context.Cause(ctx))) {
		// A signal ended the command: say so, not "context canceled".
		fmt.Fprintf(env.Stderr, "berth: %s before the command finished\n", interruptedBy(ctx))
		return interruptCode(ctx)
	}
	fmt.Fprintln(env.Stderr, "berth:", describe(err))
	var ue usageError
	if errors.As(err, &ue) {
		return 2
	}
	return 1
}

// describe words an error for a person: API errors say what to do.
func describe(err error) string {
	if msg, ok := describeUnreachable(err); ok {
		return msg
	}
	var ae *api.Error
	if !errors.As(err, &ae) {
		return err.Error()
	}
	msg := err.Error() // ae's, with whatever the CLI wrapped around it
	switch ae.Code {
	case api.CodeUnauthenticated:
		msg += "\n(set BERTH_API_KEY, or run berth login)"
	case api.CodeAmbiguous:
		msg += "\n(name the sandbox by its id instead)"
	}
	return msg
}

func newRoot(env Env) *cobra.Command {
	g := &globals{env: env}
	root := &cobra.Command{
		Use:   "berth",
		Short: "berth lends isolated sandboxes to coding agents and engineers",
		Long: `berth lends isolated sandboxes to coding agents and engineers, and runs
coding-agent CLIs inside them under one fixed contract.

The gateway is "berth serve". Every other command talks to a gateway:
it finds it from --url, BERTH_URL or the file "berth login" writes,
and authenticates with BERTH_API_KEY or that file.`,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.PersistentFlags().StringVar(&g.url, "url", "", "the gateway's address (default $BERTH_URL, the login file, or http://localhost:8080)")
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageError{err} })
	root.AddCommand(
		newServeCmd(env),
		newAdminCmd(env),
		newLoginCmd(g),
		newWhoamiCmd(g),
		newOrgCmd(g),
		newProjectCmd(g),
		newUserCmd(g),
		newKeyCmd(g),
		newGuardrailCmd(g),
		newSecretCmd(g),
		newTriggerCmd(g),
		newAgentConfigCmd(g),
		newModelCmd(g),
		newSandboxCmd(g),
		newRepoCmd(env),
		newImageCmd(env),
		newAuditCmd(g),
		newVersionCmd(g),
	)
	root.Version = clientVersion()
	root.SetVersionTemplate("berth {{.Version}}\n")
	refuseUnknownSubcommands(root)
	completeNames(root, g)
	return root
}

// refuseUnknownSubcommands makes every command that only groups others
// (berth, berth sandbox, …) refuse an unknown subcommand as a usage mistake.
// Left to cobra, "berth sandbox terminat dev" prints help and exits 0.
func refuseUnknownSubcommands(c *cobra.Command) {
	for _, sub := range c.Commands() {
		refuseUnknownSubcommands(sub)
	}
	if !c.HasSubCommands() || c.Runnable() {
		return
	}
	c.Args = cobra.ArbitraryArgs
	c.RunE = func(cmd *cobra.Command, args []string) error {
		if len(args) == 0 {
			return cmd.Help()
		}
		msg := fmt.Sprintf("unknown command %q for %s", args[0], cmd.CommandPath())
		cmd.SuggestionsMinimumDistance = 2
		if s := cmd.SuggestionsFor(args[0]); len(s) > 0 {
			msg += fmt.Sprintf(" (did you mean %s?)", s[0])
		}
		return usageError{fmt.Errorf("%s (see %s --help)", msg, cmd.CommandPath())}
	}
}

// noArgs is cobra.NoArgs with a usage error.
func noArgs(cmd *cobra.Command, args []string) error {
	if len(args) != 0 {
		return usageError{fmt.Errorf("%s: takes no arguments, got %q (see %s --help)", cmd.CommandPath(), args, cmd.CommandPath())}
	}
	return nil
}

// exactArgs is cobra.ExactArgs with a usage error that names what is missing.
func exactArgs(n int, what string) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) != n {
			return usageError{fmt.Errorf("%s: want %s, got %d arguments (see %s --help)", cmd.CommandPath(), what, len(args), cmd.CommandPath())}
		}
		return nil
	}
}
