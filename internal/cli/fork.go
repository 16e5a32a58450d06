package cli

import (
	"errors"
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"berth.dev/berth/internal/api"
)

// newSandboxForkCmd is berth sandbox fork: a running sandbox copied into
// new ones that go on from its memory.
func newSandboxForkCmd(g *globals) *cobra.Command {
	var (
		count          int
		noWait         bool
		w              waiting
		output         string
		task, taskFile string
	)
	cmd := &cobra.Command{
		Use:   "fork NAME NEW",
		Short: "Copy a running sandbox on the isolated tier, or a session between tasks, into NEW (or NEW-1 … NEW-N)",
		Long: `Copy a running engineer sandbox on the isolated tier (gVisor) into NEW, or
into NEW-1 … NEW-N with --count N (at most 8). Each fork goes on from the
source's memory and a copy of its volume: a build, a dev server or tmux
goes on where it was. Each has its own name, key and volume from then on
(its own expiry and place in the quota too: the forks must all fit, or
none is made). Processes taken over keep the source's environment as it
was in memory, while new ssh sessions get the fork's own. The source runs
on.

Only the owner (or an operator) forks a sandbox. One that is not running,
or whose runtime cannot save its memory, is refused, as is a fork whose
save fails (no fork is made then). The audit log records sandbox.fork on
the source and on each fork.

An agent's session (created with --session) forks between tasks, with
--task (or --task-file): best of N from one set-up session. Its checkout
and its agent's home (the conversation) are copied into each fork, and
each runs the task as the next task of that conversation, on that work,
pushing to its own branch berth/NEW-i after a clean exit. Each fork is a
session of its own afterwards (berth sandbox task, diff, logs), and the
source waits for its next task as before. Compare the forks' work with
berth sandbox diff, or have a reviewer name the best: berth sandbox create
judge --purpose agent --role reviewer --repo R --branch berth/NAME
--compare NEW-1,NEW-2 --task "...".

Unless --no-wait, it waits until each fork is running, as create does.`,
		Example: `  berth sandbox fork dev dev-try
  berth sandbox fork dev exp --count 3      # exp-1, exp-2 and exp-3
  berth sandbox fork fix-123 try --count 4 --task "Make the failing test pass"`,
		Args: exactArgs(2, "the sandbox's name or id and the fork's name (NEW)"),
		RunE: func(cmd *cobra.Command, args []string) error {
			switch {
			case task != "" && taskFile != "":
				return usageError{errors.New("give --task or --task-file, not both")}
			case taskFile != "":
				b, err := readFile(g.env, taskFile)
				if err != nil {
					return usageError{fmt.Errorf("--task-file: %w", err)}
				}
				task = string(b)
			}
			c, url, err := g.clientAndURL()
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			// By id: the key files remembered for the source are its id's.
			src, err := c.Sandbox(ctx, args[0])
			if err != nil {
				return err
			}
			w.began = g.env.Now()
			forks, err := c.Fork(ctx, args[0], api.Fork{Name: args[1], Count: count, Task: task})
			if err != nil {
				return err
			}
			// The forks take the source's ssh keys: berth sandbox config
			// and ssh use the same key files for them.
			if ids, err := g.readIdentities(); err == nil {
				for _, sb := range forks {
					if err := g.rememberIdentities(url, sb.ID, ids.of(url, src.ID)); err != nil {
						fmt.Fprintf(g.env.Stderr, "warning: could not remember the key files for berth sandbox config: %v\n", err)
						break
					}
				}
			}
			failed := false
			if !noWait {
				for i, sb := range forks {
					// One deadline for them all: each waits what is left.
					left := w
					left.timeout = max(w.timeout-g.env.Now().Sub(w.began), 0)
					if forks[i], err = waitReady(ctx, g.env, c, sb, left); err != nil {
						return err
					}
					if forks[i].State == api.StateFailed {
						failed = true
					}
				}
			}
			if err := render(g.env.Stdout, output, forks, func(tw *tabwriter.Writer) {
				for _, sb := range forks {
					fmt.Fprintf(tw, "%s\t%s\t%s\n", sb.Name, sb.ID, sb.State)
				}
			}); err != nil {
				return err
			}
			if failed {
				return exitError{code: 1} // the wait said why, on standard error
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.IntVar(&count, "count", 1, "how many forks, 1 to 8: more than one are named NEW-1 … NEW-N")
	f.StringVar(&task, "task", "", "a session's fork: the task each fork runs next (at most 1 MiB; 131,071 bytes for a kelos class)")
	f.StringVar(&taskFile, "task-file", "", "a session's fork: read the task from a file (- for standard input)")
	f.BoolVar(&noWait, "no-wait", false, "return while the forks are still starting")
	f.DurationVar(&w.timeout, "timeout", 10*time.Minute, "how long to wait for them all to run")
	outputFlag(cmd, &output)
	return cmd
}
