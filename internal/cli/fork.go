package cli

import (
	"context"
	"errors"
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"berth.dev/berth/internal/api"
	"berth.dev/berth/internal/client"
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
		reviewTask     string
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
berth sandbox diff, or have a reviewer name the best: with --review TEXT
the command waits until every fork's task is over, then creates the
reviewer NEW-review, which compares the forks that pushed work (berth
sandbox create --compare, on the source's branch) with TEXT as its task,
waits for its verdict, and says which attempt it judges best. It exits 1
when fewer than two forks pushed work, or the review is held.

Unless --no-wait, it waits until each fork is running, as create does.`,
		Example: `  berth sandbox fork dev dev-try
  berth sandbox fork dev exp --count 3      # exp-1, exp-2 and exp-3
  berth sandbox fork fix-123 try --count 4 --task "Make the failing test pass"
  berth sandbox fork fix-123 try --count 3 --task-file task.md --review "Which fix is simplest and complete?"`,
		Args: exactArgs(2, "the sandbox's name or id and the fork's name (NEW)"),
		RunE: func(cmd *cobra.Command, args []string) error {
			task, err := taskOf(g.env, task, taskFile)
			if err != nil {
				return err
			}
			if reviewTask != "" && (task == "" || noWait) {
				return usageError{errors.New("--review compares a session's forks once their task is over: give --task (or --task-file), and not --no-wait")}
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
			var reviewErr error
			if reviewTask != "" && !failed {
				var judge api.Sandbox
				forks, judge, reviewErr = reviewForks(ctx, g.env, c, src, forks, args[1]+"-review", reviewTask, w)
				if judge.ID != "" {
					forks = append(forks, judge)
				}
			}
			if err := render(g.env.Stdout, output, forks, func(tw *tabwriter.Writer) {
				for _, sb := range forks {
					fmt.Fprintf(tw, "%s\t%s\t%s%s\n", sb.Name, sb.ID, sb.State, reviewed(sb))
				}
			}); err != nil {
				return err
			}
			if failed {
				return exitError{code: 1} // the wait said why, on standard error
			}
			return reviewErr
		},
	}
	f := cmd.Flags()
	f.IntVar(&count, "count", 1, "how many forks, 1 to 8: more than one are named NEW-1 … NEW-N")
	f.StringVar(&task, "task", "", "a session's fork: the task each fork runs next (at most 1 MiB; 131,071 bytes for a kelos class)")
	f.StringVar(&taskFile, "task-file", "", "a session's fork: read the task from a file (- for standard input)")
	f.StringVar(&reviewTask, "review", "", "a session's fork: once every fork's task is over, have a reviewer (NEW-review) compare their work with this task and name the best")
	f.BoolVar(&noWait, "no-wait", false, "return while the forks are still starting")
	f.DurationVar(&w.timeout, "timeout", 10*time.Minute, "how long to wait for them all to run")
	outputFlag(cmd, &output)
	return cmd
}

// reviewForks waits until each of a session's forks is done with its
// task, then has the reviewer name compare those that pushed work, and
// waits for its verdict. It returns the forks as they ended and the
// reviewer; the error says why there is no best (fewer than two attempts
// to compare, a review held).
func reviewForks(ctx context.Context, env Env, c *client.Client, src api.Sandbox, forks []api.Sandbox, name, task string, w waiting) ([]api.Sandbox, api.Sandbox, error) {
	var compare []string
	for i, sb := range forks {
		done, err := waitRunOver(ctx, c, sb, w)
		if err != nil {
			return forks, api.Sandbox{}, err
		}
		forks[i] = done
		r := done.Run
		switch {
		case r != nil && r.Commit != "":
			fmt.Fprintf(env.Stderr, "%s: task %s, pushed %s (%s)\n", done.Name, r.State, r.Branch+"@"+shortCommit(r.Commit), elapsed(env.Now().Sub(w.began)))
			compare = append(compare, string(done.ID))
		case r != nil:
			fmt.Fprintf(env.Stderr, "%s: task %s, pushed nothing%s\n", done.Name, r.State, because(r.Error))
		default:
			fmt.Fprintf(env.Stderr, "%s: %s%s\n", done.Name, done.State, because(done.Reason))
		}
	}
	if len(compare) < 2 {
		return forks, api.Sandbox{}, fmt.Errorf("%d of the %d forks pushed work: a review compares 2 or more (berth sandbox show NAME says why)", len(compare), len(forks))
	}
	// On the source's branch, where its work is: each attempt's change is
	// then its own alone.
	branch := src.Branch
	if src.Run != nil && src.Run.Branch != "" {
		branch = src.Run.Branch
	}
	judge, err := c.CreateSandbox(ctx, api.CreateSandbox{Name: name, Purpose: "agent", Role: "reviewer", Class: src.Class, Repo: src.Repo,
		Branch: branch, Runner: src.Runner, Task: task, Compare: compare})
	if err != nil {
		return forks, api.Sandbox{}, err
	}
	if judge, err = waitRunOver(ctx, c, judge, w); err != nil {
		return forks, judge, err
	}
	r := judge.Run
	switch {
	case r == nil || r.Review == nil:
		return forks, judge, fmt.Errorf("the reviewer %s %s without a verdict%s", judge.Name, judge.State, because(judge.Reason))
	case r.Review.Outcome == "held":
		return forks, judge, fmt.Errorf("the review of %s is held for a human%s (berth sandbox show %s)", judge.Name, because(r.Review.Reason), judge.Name)
	}
	fmt.Fprintf(env.Stderr, "%s: best %s (%s)%s\n", judge.Name, r.Review.Best, r.Review.Outcome, because(r.Review.Summary))
	return forks, judge, nil
}

// waitRunOver polls until sb is done with its task: suspended (a
// session waiting for the next) or ended. w's timeout bounds it from
// w.began.
func waitRunOver(ctx context.Context, c *client.Client, sb api.Sandbox, w waiting) (api.Sandbox, error) {
	wctx, stop := context.WithDeadline(ctx, w.began.Add(w.timeout))
	defer stop()
	for sb.State == api.StateStarting || sb.State == api.StateRunning {
		select {
		case <-wctx.Done():
			if ctx.Err() != nil {
				return sb, exitError{code: interruptCode(ctx)}
			}
			return sb, fmt.Errorf("sandbox %s is still %s after %s (it goes on: berth sandbox show %s)", sb.Name, sb.State, w.timeout, sb.Name)
		case <-time.After(logWait):
		}
		next, err := c.Sandbox(wctx, sb.ID)
		if err != nil {
			if wctx.Err() != nil {
				continue
			}
			return sb, err
		}
		sb = next
	}
	return sb, nil
}

// reviewed is what a list line adds of a reviewer's verdict.
func reviewed(sb api.Sandbox) string {
	if sb.Run == nil || sb.Run.Review == nil {
		return ""
	}
	v := sb.Run.Review
	if v.Best != "" {
		return "\treview " + v.Outcome + ", best " + v.Best
	}
	return "\treview " + v.Outcome
}
