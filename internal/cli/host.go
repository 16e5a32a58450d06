package cli

import (
	"fmt"
	"slices"
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
			log := server.NewLogger(env.Stderr, cfg.LogLevel)
			// Once it serves: a gateway that refuses to start leaves nothing.
			record := server.OnServing(func() {
				if err := recordSettings(env, cfg); err != nil {
					log.Warn("the on-host commands (berth admin, repo, image) will not find this gateway's settings", "err", err)
				}
			})
			return server.Serve(cmd.Context(), cfg, log, append(slices.Clone(env.Serve), record)...)
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
		purpose    string
		timeout    time.Duration
		output     string
	)
	cmd := &cobra.Command{
		Use:   "check IMAGE",
		Short: "Check that an image keeps the contract of an agent image or an engineer sandbox",
		Long: `Check that IMAGE, in the podman driver's store, keeps the contract of its
purpose: an agent image's (README, Agent runs), without starting its agent,
or an engineer sandbox's (README, The sandbox image), by starting one and
logging in.

The purpose is --purpose, else agent when a runner is named (--runner or the
image's berth.runner label), else the image's berth.purpose label (the
sandbox image and the images berth image build makes say engineer). An image
with neither label is refused: say --purpose.

An agent image runs twice under the hardening of an agent run (read-only
root, /tmp and HOME on tmpfs, no capabilities, no-new-privileges, a pids
limit, as uid 1001, no network at all) with a temporary checkout at /work:
  1. with a prompt file and BERTH_IMAGE_CHECK=1, which asks berth-init to
     do everything an agent run does except the exec, and report instead:
     non-root, capabilities, the working directory and its permissions, the
     prompt handed over as stdin (compared with what was written), the "$@"
     slot forwarded unmodified, HOME, the runner's config files, git's
     identity and safe.directory, and the runner's binary on PATH;
  2. without the prompt file, which must end with exit 64.
The runner is --runner, else the image's berth.runner label (images/build
sets it).

An engineer image starts as the podman driver starts an engineer sandbox
(uid 1001, every capability dropped, no-new-privileges, HOME on a volume of
its own, the sandboxes' network) with a key the check makes, and is looked
at as its engineer would: berth-init is the entrypoint; sshd answers on
port 2222 within --timeout; the check logs in with its key as the user
"berth sandbox config" names, and finds a session running as the image's
berth.uid (the driver's 1001, not root), HOME /home/berth writable,
~/.local/bin on PATH (a program put there runs by name in the next
session), and git, ssh-keygen and the commands the image's berth.tools label
promises on PATH; and, when the image has /etc/berth/post-create.json (the
devcontainer's postCreateCommand, as berth image build writes it), that it
is a string, an array of strings or an object of them. The container and
its volume are removed after.

It prints a table of the elements and fails if any does not hold. podman
runs with the podman driver's environment, as for "berth admin podman-env".`,
		Args: exactArgs(1, "an image"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if runnerName != "" {
				if _, err := runner.Get(runnerName); err != nil {
					return usageError{fmt.Errorf("--runner: %w", err)}
				}
			}
			switch purpose {
			case "", "agent":
			case "engineer":
				if runnerName != "" {
					return usageError{fmt.Errorf("--runner names an agent image's runner; --purpose engineer has none")}
				}
			default:
				return usageError{fmt.Errorf("--purpose %q: want agent or engineer", purpose)}
			}
			cfg, err := hostConfig(cmd, env)
			if err != nil {
				return fmt.Errorf("image check: the gateway's settings are wrong:\n%w", err)
			}
			res, err := server.CheckImage(cmd.Context(), cfg, args[0], server.ImageCheckOptions{
				Purpose: purpose, Runner: runnerName, Timeout: timeout,
			})
			if err != nil {
				return err
			}
			if err := render(env.Stdout, output, res, func(tw *tabwriter.Writer) {
				fmt.Fprintf(tw, "image %s, purpose %s, runner %s\n", res.Image, res.Purpose, orDash(res.Runner))
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
	cmd.Flags().StringVar(&purpose, "purpose", "", "the contract checked: agent or engineer (default: from the image's labels)")
	cmd.Flags().StringVar(&runnerName, "runner", "", "the image's runner (default: its berth.runner label)")
	cmd.Flags().DurationVar(&timeout, "timeout", 2*time.Minute, "how long each run of the image may take (an engineer image's: until its sessions end)")
	outputFlag(cmd, &output)
	return cmd
}
