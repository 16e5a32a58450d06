package cli

import (
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"berth.dev/berth/internal/runner"
	"berth.dev/berth/internal/server"
)

// The commands that run on the gateway's host: berth serve, and berth
// image build and check. Each is a shell around server.

func newServeCmd(env Env) *cobra.Command {
	return &cobra.Command{
		Use:   "serve",
		Short: "Run the gateway",
		Long: `Run the gateway: the API, the sandbox driver and the sweep.

It reads its settings from BERTH_* environment variables once, and refuses
to start, naming the setting, when one is wrong.

` + server.SettingsHelp,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := server.LoadConfig(env.Getenv)
			if err != nil {
				return fmt.Errorf("refusing to start:\n%w", err)
			}
			return server.Serve(cmd.Context(), cfg, server.NewLogger(env.Stderr, cfg.LogLevel), env.Serve...)
		},
	}
}

func newImageCmd(env Env) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "image",
		Short: "Class images (on the gateway's host): build and check them",
	}
	cmd.AddCommand(newImageBuildCmd(env), newImageCheckCmd(env))
	return cmd
}

func newImageCheckCmd(env Env) *cobra.Command {
	var (
		runnerName string
		timeout    time.Duration
		output     string
	)
	cmd := &cobra.Command{
		Use:   "check IMAGE",
		Short: "Check that an agent image keeps the agent-run contract, without starting its agent",
		Long: `Check that IMAGE, in the podman driver's store, keeps the agent-run contract
(SPEC S13) without starting its agent: the smoke test of an agent image.

It runs the image twice under the hardening of an agent run (read-only root,
/tmp and HOME on tmpfs, no capabilities, no-new-privileges, a pids limit, as
uid 1001, no network at all) with a temporary checkout at /work:
  1. with a prompt file and BERTH_IMAGE_CHECK=1, which asks berth-init to
     do everything an agent run does except the exec, and report instead:
     non-root, capabilities, the working directory and its permissions, the
     prompt handed over as stdin (compared with what was written), the "$@"
     slot forwarded unmodified, HOME, the runner's config files, git's
     identity and safe.directory, and the runner's binary on PATH;
  2. without the prompt file, which must end with exit 64.
It prints a table of the elements and fails if any does not hold.

The runner is --runner, else the image's berth.runner label (images/build
sets it). podman runs with the podman driver's environment, as for
"berth admin podman-env".`,
		Args: exactArgs(1, "an image"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if runnerName != "" {
				if _, err := runner.Get(runnerName); err != nil {
					return usageError{fmt.Errorf("--runner: %w", err)}
				}
			}
			cfg, err := server.LoadConfig(env.Getenv)
			if err != nil {
				return fmt.Errorf("image check: the gateway's settings are wrong:\n%w", err)
			}
			res, err := server.CheckImage(cmd.Context(), cfg, args[0], runnerName, timeout)
			if err != nil {
				return err
			}
			if err := render(env.Stdout, output, res, func(tw *tabwriter.Writer) {
				fmt.Fprintf(tw, "image %s, runner %s\n", res.Image, orDash(res.Runner))
				fmt.Fprintln(tw, "ELEMENT\tOK\tDETAIL")
				for _, e := range res.Elements {
					mark := "✓"
					if !e.OK {
						mark = "✗"
					}
					fmt.Fprintf(tw, "%s\t%s\t%s\n", e.Name, mark, e.Detail)
				}
			}); err != nil {
				return err
			}
			if n := res.Failed(); n > 0 {
				return fmt.Errorf("image check: %d of %d elements do not hold", n, len(res.Elements))
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&runnerName, "runner", "", "the image's runner (default: its berth.runner label)")
	cmd.Flags().DurationVar(&timeout, "timeout", 2*time.Minute, "how long each run of the image may take")
	outputFlag(cmd, &output)
	return cmd
}
