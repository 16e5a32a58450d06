package cli

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"berth.dev/berth/internal/api"
	"berth.dev/berth/internal/client"
)

// newSandboxTaskCmd is berth sandbox task: a session's next task.
func newSandboxTaskCmd(g *globals) *cobra.Command {
	var (
		task, taskFile, output string
		follow                 bool
	)
	cmd := &cobra.Command{
		Use:   "task NAME",
		Short: "Give a session (an agent sandbox created with --session) its next task",
		Long: `Give a session its next task. A session is an agent sandbox created with
--session: after each task it stays, suspended (it uses no CPU, and counts
as a live sandbox in the quota), with its checkout, its branch berth/NAME
and its agent's own state. Its next task starts it again on all of that
with a fresh key; the agent CLI continues its previous conversation, the
host pushes berth/NAME again after a clean exit (on top of the last push),
and the run is recorded as the session's next (berth sandbox runs NAME).

The session must be waiting: a task still running is refused, as is a
session that has ended. Only its owner gives it tasks. The task's limits
are a create's (berth sandbox create --help). A session ends with berth
sandbox terminate, at its expiry, or once it has waited longer than its
class's session_idle.

With --follow, show the new run's transcript until it ends, and exit with
its outcome (as berth sandbox logs -f).`,
		Example: `  berth sandbox create fix-123 --purpose agent --session --repo acme/app --task-file task.md
  berth sandbox task fix-123 --task "The reviewer asks for a test of the empty case" -f
  berth sandbox task fix-123 --task-file - < review.md`,
		Args: exactArgs(1, "the session's name or id"),
		RunE: func(cmd *cobra.Command, args []string) error {
			task, err := taskOf(g.env, task, taskFile)
			if err != nil {
				return err
			}
			if task == "" {
				return usageError{errors.New("give the task: --task TEXT or --task-file FILE (- for standard input)")}
			}
			c, err := g.client()
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			before, err := c.Sandbox(ctx, args[0])
			if err != nil {
				return err
			}
			sb, err := c.GiveTask(ctx, string(before.ID), task)
			if err != nil {
				return err
			}
			if !follow {
				return render(g.env.Stdout, output, sb, func(tw *tabwriter.Writer) {
					fmt.Fprintf(tw, "%s\t%s\t%s\ttask %d\n", sb.Name, sb.ID, sb.State, lastSeq(before)+1)
				})
			}
			if err := waitNextRun(ctx, c, string(sb.ID), lastSeq(before)); err != nil {
				return err
			}
			return followRun(ctx, g, c, string(sb.ID), logView{})
		},
	}
	f := cmd.Flags()
	f.StringVar(&task, "task", "", "the next task (at most 1 MiB; 131,071 bytes for a kelos class)")
	f.StringVar(&taskFile, "task-file", "", "read the next task from a file (- for standard input)")
	f.BoolVarP(&follow, "follow", "f", false, "show the run's transcript until it ends, and exit with its outcome")
	outputFlag(cmd, &output)
	return cmd
}

// lastSeq is the number of sb's latest run, 0 when it has none.
func lastSeq(sb api.Sandbox) int {
	if sb.Run == nil {
		return 0
	}
	return sb.Run.Seq
}

// waitNextRun waits until ref's latest run is a later one than seq, or
// the session ended without one: the new task's log is then the one to
// follow.
func waitNextRun(ctx context.Context, c *client.Client, ref string, seq int) error {
	tick := time.NewTicker(logWait)
	defer tick.Stop()
	for {
		sb, err := c.Sandbox(ctx, ref)
		if err != nil {
			return err
		}
		switch {
		case sb.Run != nil && sb.Run.Seq > seq:
			return nil
		case ended(sb):
			return fmt.Errorf("sandbox %s is %s before its task started%s", sb.Name, sb.State, because(sb.Reason))
		}
		select {
		case <-ctx.Done():
			return exitError{code: 130}
		case <-tick.C:
		}
	}
}

// newSandboxRunsCmd is berth sandbox runs: an agent sandbox's runs.
func newSandboxRunsCmd(g *globals) *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:   "runs NAME",
		Short: "List an agent sandbox's runs (a session's tasks), each with its outcome, tokens and cost",
		Long: `List an agent sandbox's runs, oldest first: a session's tasks, one run each,
with its outcome, the tokens and cost its agent reported, and what it
pushed. berth sandbox logs NAME --run N shows one run's transcript; berth
sandbox show NAME has the latest run in full, and the session's cost in all.`,
		Example: `  berth sandbox runs fix-123
  berth sandbox runs fix-123 -o json`,
		Args: exactArgs(1, "a sandbox name or id"),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := g.client()
			if err != nil {
				return err
			}
			runs, err := c.Runs(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			return render(g.env.Stdout, output, runs, func(tw *tabwriter.Writer) {
				fmt.Fprintln(tw, "RUN\tSTATE\tEXIT\tTOKENS IN/OUT\tCOST\tPUSHED\tSTARTED")
				for _, r := range runs {
					exit := "-"
					if r.ExitCode != nil {
						exit = strconv.Itoa(*r.ExitCode)
					}
					pushed := "-"
					if r.Commit != "" {
						pushed = r.Branch + "@" + shortCommit(r.Commit)
					}
					fmt.Fprintf(tw, "%d\t%s\t%s\t%d/%d\t%s\t%s\t%s\n", r.Seq, r.State, exit, r.Usage.Input, r.Usage.Output,
						agentCost(r), pushed, r.StartedAt.UTC().Format(time.RFC3339))
				}
			})
		},
	}
	outputFlag(cmd, &output)
	return cmd
}

// taskOf is the task --task gives, or --task-file reads (- for standard
// input): a usage error when both are given. "" when neither is.
func taskOf(env Env, task, file string) (string, error) {
	switch {
	case task != "" && file != "":
		return "", usageError{errors.New("give --task or --task-file, not both")}
	case file != "":
		b, err := readFile(env, file)
		if err != nil {
			return "", usageError{fmt.Errorf("--task-file: %w", err)}
		}
		return string(b), nil
	}
	return task, nil
}
