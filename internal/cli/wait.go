package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"syscall"
	"time"

	"berth.dev/berth/internal/api"
	"berth.dev/berth/internal/client"
)

// waiting is how a command that started a sandbox (create, resume) waits
// for it: until it leaves starting, at most timeout; an interrupt stops the
// wait and, with cancel, terminates the sandbox.
type waiting struct {
	began   time.Time // when the command asked for the start
	timeout time.Duration
	cancel  bool // --cancel-on-interrupt
}

// waitReady polls until the sandbox leaves starting, printing on stderr
// each stage its start reaches, with the time since it was asked for.
func waitReady(ctx context.Context, env Env, c *client.Client, sb api.Sandbox, w waiting) (api.Sandbox, error) {
	wctx, stop := context.WithTimeout(ctx, w.timeout)
	defer stop()
	// The create (or resume) was admitted; the start may be further on
	// already by the first look.
	fmt.Fprintf(env.Stderr, "%s: admitted (%s)\n", sb.Name, elapsed(env.Now().Sub(w.began)))
	last := "admitted"
	show := func(sb api.Sandbox) {
		if s := stageOf(sb); s != last {
			fmt.Fprintf(env.Stderr, "%s: %s (%s)\n", sb.Name, s, elapsed(env.Now().Sub(w.began)))
			last = s
		}
	}
	show(sb)
	// Soon at first, then less often: a sandbox from a warm pool is ready
	// in tens of milliseconds, a cold one in a few hundred, and a wait
	// that began at 100 ms and doubled said so at 100 and at 700 ms.
	delay := 25 * time.Millisecond
	for sb.State == api.StateStarting {
		select {
		case <-wctx.Done():
			return sb, w.stopped(ctx, env, c, sb)
		case <-time.After(delay):
		}
		delay = min(delay*3/2, time.Second)
		next, err := c.Sandbox(wctx, sb.ID)
		if err != nil {
			if wctx.Err() != nil {
				return sb, w.stopped(ctx, env, c, sb)
			}
			return sb, err
		}
		sb = next
		show(sb)
	}
	return sb, nil
}

// stopped says why the wait ended before the sandbox did starting: the
// command was interrupted (ctx is done) or the timeout passed.
func (w waiting) stopped(ctx context.Context, env Env, c *client.Client, sb api.Sandbox) error {
	took := elapsed(env.Now().Sub(w.began))
	if ctx.Err() == nil {
		return fmt.Errorf("sandbox %s is still starting after %s (it goes on: berth sandbox show %s; berth sandbox terminate %s ends it)",
			sb.Name, took, sb.Name, sb.Name)
	}
	code := interruptCode(ctx)
	if !w.cancel {
		fmt.Fprintf(env.Stderr, "%s: stopped waiting after %s; the sandbox keeps starting.\n"+
			"  berth sandbox show %s        how it goes\n"+
			"  berth sandbox terminate %s   end it\n", sb.Name, took, sb.Name, sb.Name)
		return exitError{code: code}
	}
	// The command's context is over; the terminate gets a little time of
	// its own.
	tctx, done := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer done()
	if _, err := c.Terminate(tctx, sb.ID); err != nil {
		return fmt.Errorf("interrupted after %s; could not terminate sandbox %s, which keeps starting (berth sandbox terminate %s): %w",
			took, sb.Name, sb.Name, err)
	}
	fmt.Fprintf(env.Stderr, "%s: interrupted after %s; terminated (--cancel-on-interrupt)\n", sb.Name, took)
	return exitError{code: code}
}

// stageOf words how far a sandbox's start has got.
func stageOf(sb api.Sandbox) string {
	switch sb.State {
	case api.StateStarting:
	case api.StateRunning:
		if sb.Purpose == "agent" {
			return "running: agent running"
		}
		return "running: sshd answering"
	case api.StateFailed:
		return "failed: " + sb.Reason
	default:
		return string(sb.State)
	}
	switch sb.Stage {
	case "checkout":
		return "admitted; checking out the repository"
	case "machine":
		switch {
		case sb.Purpose == "agent" && sb.Repo != "":
			return "repository checked out; creating the machine"
		case sb.Repo != "":
			return "creating the machine, which checks out the repository"
		}
		return "creating the machine"
	}
	return "admitted"
}

// elapsed words a wait's time: tenths of a second under a minute.
func elapsed(d time.Duration) string {
	if d < time.Minute {
		return fmt.Sprintf("%.1fs", d.Seconds())
	}
	return short(d)
}

// interrupted is the cause Run cancels a command's context with when a
// signal comes.
type interrupted struct{ sig os.Signal }

func (i interrupted) Error() string { return "interrupted by " + i.sig.String() }

// interruptCode is the exit status of a command its context's end
// interrupted: a shell's for the signal (130 for SIGINT, 143 for SIGTERM).
func interruptCode(ctx context.Context) int {
	var i interrupted
	if errors.As(context.Cause(ctx), &i) && i.sig == syscall.SIGTERM {
		return 143
	}
	return 130
}

// interruptedBy words what ended a command's context: "interrupted
// (SIGTERM)".
func interruptedBy(ctx context.Context) string {
	var i interrupted
	switch {
	case !errors.As(context.Cause(ctx), &i):
		return "interrupted"
	case i.sig == syscall.SIGTERM:
		return "interrupted (SIGTERM)"
	}
	return "interrupted (SIGINT)"
}
