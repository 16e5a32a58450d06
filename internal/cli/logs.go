package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"berth.dev/berth/internal/api"
	"berth.dev/berth/internal/client"
	"berth.dev/berth/internal/transcript"
)

func newSandboxLogsCmd(g *globals) *cobra.Command {
	var (
		follow, raw bool
		output      = "table"
		run         int
	)
	cmd := &cobra.Command{
		Use:   "logs NAME",
		Short: "Show an agent sandbox's run as a transcript (-f to follow it until the run ends)",
		Long: `Show an agent sandbox's run as a transcript: the assistant's text, each tool
call (its name and its arguments on one line) with its result (trimmed,
saying how much was cut), errors, the agent's standard error, and the run's
totals at the end (tokens, turns, and the cost when the agent's stream says
it; berth sandbox show has the gateway's).

--raw prints the log as it is kept: the runner's JSON events as written and
its standard error prefixed "stderr: ". -o json prints the parsed events,
one JSON object a line (kind: text, tool_call, tool_result, error, stderr,
note; the last, kind totals).

With --follow, keep showing what the run writes until the run is over, then
exit with its outcome: 0 when it succeeded, 1 when it failed (the reason on
standard error). An engineer sandbox has no run log.`,
		Example: `  berth sandbox logs fix-123
  berth sandbox logs -f fix-123
  berth sandbox logs fix-123 --raw
  berth sandbox logs fix-123 -o json | jq -r 'select(.kind=="tool_call") | .summary'`,
		Args: exactArgs(1, "a sandbox name or id"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if raw && output == "json" {
				return usageError{errors.New("give --raw or -o json, not both")}
			}
			c, err := g.client()
			if err != nil {
				return err
			}
			show := logView{raw: raw, json: output == "json", run: run}
			if follow && run > 0 {
				return usageError{errors.New("--follow follows the latest run; give --run or --follow, not both")}
			}
			if follow {
				return followRun(cmd.Context(), g, c, args[0], show)
			}
			return showLog(cmd.Context(), g, c, args[0], show, false)
		},
	}
	cmd.Flags().BoolVarP(&follow, "follow", "f", false, "keep showing what the run writes until it is over; exit with its outcome")
	cmd.Flags().IntVar(&run, "run", 0, "a session's run, by number (berth sandbox runs); default the latest")
	cmd.Flags().BoolVar(&raw, "raw", false, "print the log as kept: the runner's JSON events and stderr lines")
	cmd.Flags().VarP((*formatValue)(&output), "output", "o", "json: the parsed events, one JSON object a line (default: the transcript)")
	return cmd
}

// logView is how a run's log is shown: raw, the parsed events as JSON
// lines, or the transcript.
type logView struct {
	raw, json bool
	run       int // a session's task's run; 0 the latest
}

// showLog prints the log of ref's run, as it is or followed until the run
// is over.
func showLog(ctx context.Context, g *globals, c *client.Client, ref string, show logView, follow bool) error {
	open := c.RunLog
	switch {
	case follow:
		open = c.FollowRunLog
	case show.run > 0:
		open = func(ctx context.Context, ref string) (io.ReadCloser, error) { return c.RunLogOf(ctx, ref, show.run) }
	}
	log, err := open(ctx, ref)
	if err != nil {
		return err
	}
	defer log.Close()
	if show.raw {
		_, err = io.Copy(g.env.Stdout, log)
	} else {
		sb, serr := c.Sandbox(ctx, ref)
		if serr != nil {
			return serr
		}
		runnerName := ""
		if sb.Run != nil {
			runnerName = sb.Run.Runner
		}
		enc := json.NewEncoder(g.env.Stdout)
		err = transcript.Read(log, runnerName, func(e transcript.Event) error {
			if show.json {
				return enc.Encode(e)
			}
			return transcript.Write(g.env.Stdout, e)
		})
		if err == nil && !show.json {
			refusedLine(ctx, g, c, ref)
		}
	}
	if err != nil {
		if ctx.Err() != nil {
			return exitError{code: 130} // interrupted: how one stops following
		}
		return fmt.Errorf("the log of %s was cut off: %w (berth sandbox logs %s shows what there is)", ref, err, ref)
	}
	return nil
}

// refusedLine ends a transcript with the hosts the egress proxy refused
// the run, as read now: what the agent wanted and did not get.
func refusedLine(ctx context.Context, g *globals, c *client.Client, ref string) {
	sb, err := c.Sandbox(ctx, ref)
	if err != nil || sb.Run == nil || len(sb.Run.EgressRefused) == 0 {
		return
	}
	fmt.Fprintf(g.env.Stdout, "✗ egress refused: %s (berth sandbox egress %s)\n", strings.Join(sb.Run.EgressRefused, ", "), sb.Name)
}

// logWait is how often followRun asks again for a run's log that has not
// started yet.
const logWait = 500 * time.Millisecond

// followRun shows ref's run as it goes until it is over, then answers its
// outcome: nil when it succeeded, else an error saying why it did not.
// A run whose log has not started yet (its machine is starting) is waited
// for.
func followRun(ctx context.Context, g *globals, c *client.Client, ref string, show logView) error {
	tick := time.NewTicker(logWait)
	defer tick.Stop()
	for {
		err := showLog(ctx, g, c, ref, show, true)
		if err == nil {
			break
		}
		if ae, ok := errors.AsType[*api.Error](err); !ok || ae.Code != api.CodeNotFound {
			return err
		}
		sb, serr := c.Sandbox(ctx, ref)
		if serr != nil {
			return serr
		}
		if ended(sb) {
			return fmt.Errorf("sandbox %s is %s and its run left no log%s", sb.Name, sb.State, because(sb.Reason))
		}
		select {
		case <-ctx.Done():
			return exitError{code: 130}
		case <-tick.C:
		}
	}
	sb, err := c.Sandbox(ctx, ref)
	if err != nil {
		return err
	}
	return runOutcome(sb)
}

// runOutcome is nil for a run that succeeded, else why it did not.
func runOutcome(sb api.Sandbox) error {
	r := sb.Run
	switch {
	case r == nil:
		return fmt.Errorf("sandbox %s has no run (%s%s)", sb.Name, sb.State, because(sb.Reason))
	case r.State == api.RunSucceeded:
		return nil
	case r.State == api.RunRunning:
		return fmt.Errorf("the log of %s ended while its run is still running: follow it again with berth sandbox logs -f %s", sb.Name, sb.Name)
	}
	why := r.Error
	if why == "" && r.ExitCode != nil {
		why = fmt.Sprintf("the agent exited %d", *r.ExitCode)
	}
	return fmt.Errorf("the run of %s %s%s (berth sandbox show %s has the details)", sb.Name, r.State, because(why), sb.Name)
}

func ended(sb api.Sandbox) bool {
	return sb.State == api.StateTerminated || sb.State == api.StateFailed || sb.State == api.StateExpired
}

func because(why string) string {
	if why == "" {
		return ""
	}
	return ": " + why
}
