package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"berth.dev/berth/internal/api"
	"berth.dev/berth/internal/client"
	"berth.dev/berth/internal/quantity"
)

func newSandboxCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "sandbox",
		Short: "Sandboxes and their classes",
		Long: `Sandboxes: machines berth lends to an engineer (reached over ssh) or to an
agent (one task on one repository, or a session of tasks). A name is yours: lowercase letters,
digits and interior hyphens, at most 40 characters. Commands that take a
NAME also take the sandbox's id (sbx_…).`,
	}
	cmd.AddCommand(
		newSandboxCreateCmd(g),
		newSandboxListCmd(g),
		newSandboxShowCmd(g),
		newSandboxLogsCmd(g),
		newSandboxDiffCmd(g),
		newSandboxEgressCmd(g),
		newSandboxTaskCmd(g),
		newSandboxRunsCmd(g),
		newSandboxActionCmd(g, "suspend", "Suspend a running engineer sandbox: its volume kept (its memory too, on the isolated tier)", (*client.Client).Suspend),
		newSandboxActionCmd(g, "resume", "Start a suspended or expired engineer sandbox again", (*client.Client).Resume),
		newSandboxForkCmd(g),
		newSandboxExtendCmd(g),
		newSandboxActionCmd(g, "terminate", "End a sandbox: its key is revoked and its machine and volume removed", (*client.Client).Terminate),
		newSandboxSSHCmd(g),
		newSandboxConfigCmd(g),
		newSandboxProxyCmd(g),
		newSandboxForwardCmd(g),
		newSandboxPreviewCmd(g),
		newClassesCmd(g),
		newApplyCmd(g),
		newDeleteClassCmd(g),
		newSandboxUsageCmd(g),
	)
	return cmd
}

func newSandboxCreateCmd(g *globals) *cobra.Command {
	var (
		req              api.CreateSandbox
		taskFile, output string
		keyFiles, env    []string
		noWait           bool
		wait             bool
		w                waiting
		follow           bool
	)
	cmd := &cobra.Command{
		Use:   "create NAME",
		Short: "Create a sandbox and wait until it is ready",
		Long: `Create a sandbox and, unless --no-wait, show each stage of its start with the
time since it was asked for (admitted, the repository checked out, the
machine created, running: sshd answering or the agent running) until it is
running (or has failed). Ctrl-C stops the wait; the sandbox keeps starting
(berth sandbox terminate ends it), unless --cancel-on-interrupt, which
terminates it.

An engineer sandbox needs an ssh public key: the ones in ~/.ssh/*.pub are
sent unless --ssh-key names a file. An agent sandbox needs --repo and
--task (or --task-file); with --role reviewer its run pushes nothing and
ends with a review verdict instead. A reviewer with --compare A,B,...
compares the pushed work of 2 to 8 agent sandboxes (a session's forks'
attempts at one task: berth sandbox fork --help): each one's change is in
its checkout as .berth-attempts/NAME.diff, and its verdict names the best
(berth sandbox show: review best). With --session it stays after its task,
suspended, for the next (berth sandbox task NAME). Its run starts on a model its runner
can call (one the project may reach, served in the runner's API): --model,
else the deployment's BERTH_AGENT_MODEL when it is one, else the first; a
create that no model fits is refused, saying why.

Without --class: the only class for the purpose; else, for an agent, the
one whose runner is the run's; else the one for that purpose alone (not a
kelos class). --ttl above the class's or the guardrail's maximum is cut
down to it. Only administrators may choose --project.

A task is UTF-8 text of at most 1 MiB (1,048,576 bytes): the agent reads it
from its prompt file on stdin, never from its environment. A class with
contract: kelos takes at most 131,071 bytes, since its image gets the task
as one argument. A longer task is refused. Past 128 KiB a task does not fit
in one argument of a command line either: use --task-file FILE, or
--task-file - for standard input.`,
		Example: `  berth sandbox create dev --class standard
  berth sandbox create fix-123 --purpose agent --repo acme/app --task-file task.md --runner claude-code
  berth sandbox create scratch --ttl 2h --ssh-key ~/.ssh/work.pub --env EDITOR=vim`,
		Args: exactArgs(1, "the sandbox's name"),
		RunE: func(cmd *cobra.Command, args []string) error {
			req.Name = args[0]
			if follow && req.Purpose != "agent" {
				return usageError{errors.New("--follow follows an agent's run: it needs --purpose agent")}
			}
			var err error
			if req.Task, err = taskOf(g.env, req.Task, taskFile); err != nil {
				return err
			}
			keys, err := sshKeys(g.env, req.Purpose, keyFiles)
			if err != nil {
				return err
			}
			req.SSHKeys = keys
			if req.Env, err = parseEnv(env); err != nil {
				return err
			}
			c, url, err := g.clientAndURL()
			if err != nil {
				return err
			}
			w.began = g.env.Now()
			sb, err := c.CreateSandbox(cmd.Context(), req)
			if err != nil {
				return err
			}
			warnCut(g.env, sb)
			// The key files named, for berth sandbox config and ssh; ssh
			// finds ~/.ssh's keys by itself.
			if err := g.rememberIdentities(url, sb.ID, keyFiles); err != nil {
				fmt.Fprintf(g.env.Stderr, "warning: could not remember the key files for berth sandbox config: %v\n", err)
			}
			if follow {
				return followRun(cmd.Context(), g, c, string(sb.ID), logView{})
			}
			if noWait || !wait {
				return render(g.env.Stdout, output, sb, func(tw *tabwriter.Writer) {
					fmt.Fprintf(tw, "%s\t%s\t%s\n", sb.Name, sb.ID, sb.State)
				})
			}
			sb, err = waitReady(cmd.Context(), g.env, c, sb, w)
			if err != nil {
				return err
			}
			if err := render(g.env.Stdout, output, sb, func(tw *tabwriter.Writer) { showTable(tw, g.env.Now(), sb) }); err != nil {
				return err
			}
			if sb.State == api.StateFailed {
				return exitError{code: 1}
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&req.Class, "class", "", "the class (berth sandbox classes lists them); default the only one that fits, else the runner's, else the one for the purpose alone")
	f.StringVar(&req.Purpose, "purpose", "engineer", "engineer or agent")
	f.StringVar(&req.Project, "project", "", "the project (administrators); default the organisation's oldest")
	f.StringVar(&req.TTL, "ttl", "", "lifetime, such as 2h or 3d; default the class's")
	f.StringVar(&req.Repo, "repo", "", "the repository to check out")
	f.StringVar(&req.Branch, "branch", "", "the branch to check out (default the repository's default): a name git takes, at most 255 bytes")
	f.StringVar(&req.Task, "task", "", "an agent's task (at most 1 MiB; 131,071 bytes for a kelos class)")
	f.StringVar(&taskFile, "task-file", "", "read the agent's task from a file (- for standard input); limits as for --task")
	f.StringVar(&req.Runner, "runner", "", "the agent CLI: claude-code, codex, opencode, gemini or pi (default: the class's runner, else the deployment's)")
	f.StringVar(&req.Model, "model", "", "the model the agent's run starts on (berth model list); default the deployment's, else the first its runner can call")
	f.StringVar(&req.Role, "role", "", "an agent's role: author (default; pushes its branch) or reviewer (pushes nothing, leaves a verdict)")
	f.StringArrayVar(&keyFiles, "ssh-key", nil, "an ssh public key file (repeatable); default ~/.ssh/*.pub")
	f.StringArrayVar(&env, "env", nil, "an environment variable K=V for the sandbox's life (repeatable; not BERTH_*)")
	f.StringSliceVar(&req.Egress, "egress", nil, "an agent's egress, narrower than its class's: none, learn (within an open class), or hosts separated by commas")
	f.StringSliceVar(&req.Compare, "compare", nil, "a reviewer's: the agent sandboxes (2 to 8, separated by commas) whose work it compares, naming the best")
	f.BoolVar(&req.Session, "session", false, "an agent's: stay after each task, suspended, for the next (berth sandbox task NAME); the agent continues its conversation")
	f.BoolVar(&req.OpenPR, "open-pr", false, "after a clean author run, open a draft pull (merge) request from berth/NAME with the run's summary and cost (forges that take them)")
	f.BoolVar(&wait, "wait", true, "wait until the sandbox is running or has failed")
	f.BoolVar(&noWait, "no-wait", false, "return as soon as the sandbox is admitted")
	f.DurationVar(&w.timeout, "timeout", 10*time.Minute, "how long --wait waits")
	f.BoolVar(&w.cancel, "cancel-on-interrupt", false, "terminate the sandbox when Ctrl-C stops the wait (default: it keeps starting)")
	f.BoolVarP(&follow, "follow", "f", false, "an agent's: show its run's transcript until it ends, and exit with its outcome (as berth sandbox logs -f)")
	outputFlag(cmd, &output)
	return cmd
}

func readFile(env Env, path string) ([]byte, error) {
	if path == "-" {
		return io.ReadAll(env.Stdin)
	}
	return os.ReadFile(path)
}

// sshKeys reads the --ssh-key files, or for an engineer sandbox without
// any, every ~/.ssh/*.pub.
func sshKeys(env Env, purpose string, files []string) ([]string, error) {
	if len(files) == 0 {
		if purpose != "" && purpose != "engineer" {
			return nil, nil
		}
		home := env.Getenv("HOME")
		if home == "" {
			return nil, nil
		}
		files, _ = filepath.Glob(filepath.Join(home, ".ssh", "*.pub"))
		slices.Sort(files)
	}
	var keys []string
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return nil, usageError{fmt.Errorf("--ssh-key: %w", err)}
		}
		for line := range strings.Lines(string(b)) {
			if line = strings.TrimSpace(line); line != "" && !strings.HasPrefix(line, "#") {
				keys = append(keys, line)
			}
		}
	}
	return keys, nil
}

func parseEnv(pairs []string) (map[string]string, error) {
	if len(pairs) == 0 {
		return nil, nil
	}
	env := map[string]string{}
	for _, p := range pairs {
		k, v, ok := strings.Cut(p, "=")
		if !ok || k == "" {
			return nil, usageError{fmt.Errorf("--env %q: want NAME=VALUE", p)}
		}
		env[k] = v
	}
	return env, nil
}

func newSandboxListCmd(g *globals) *cobra.Command {
	var class, purpose, output string
	var all bool
	var limit int
	cmd := &cobra.Command{
		Use:     "list",
		Aliases: []string{"ls"},
		Short:   "List the sandboxes you may see, newest first (live ones; --all for ended too)",
		Args:    noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := g.listClient(limit)
			if err != nil {
				return err
			}
			sbs, err := c.Sandboxes(cmd.Context(), client.ListOptions{Class: class, Purpose: purpose, All: all})
			if err != nil {
				return err
			}
			now := g.env.Now()
			return render(g.env.Stdout, output, sbs, func(tw *tabwriter.Writer) {
				fmt.Fprintln(tw, "NAME\tID\tSTATE\tPURPOSE\tCLASS\tOWNER\tEXPIRES\tRUNNING")
				for _, sb := range sbs {
					expires := until(now, sb.ExpiresAt)
					if sb.EndedAt != nil {
						expires = "ended " + until(now, *sb.EndedAt) // it expires no more
					}
					fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", sb.Name, sb.ID, sb.State, sb.Purpose, sb.Class,
						sb.OwnerName, expires, short(time.Duration(sb.RunningSeconds)*time.Second))
				}
			})
		},
	}
	cmd.Flags().StringVar(&class, "class", "", "only sandboxes of this class")
	cmd.Flags().StringVar(&purpose, "purpose", "", "only engineer or only agent sandboxes")
	cmd.Flags().BoolVar(&all, "all", false, "include ended sandboxes")
	outputFlag(cmd, &output)
	limitFlag(cmd, &limit)
	return cmd
}

func newSandboxShowCmd(g *globals) *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:   "show NAME",
		Short: "Show one sandbox in full",
		Long: `Show one sandbox in full. An agent sandbox's run shows its tokens and cost
as the agent reported them beside what the gateway metered of its model
calls (the cost budgets are charged) and, once it is over, how the two
differ and why, when berth can tell.`,
		Args: exactArgs(1, "a sandbox name or id"),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := g.client()
			if err != nil {
				return err
			}
			sb, err := c.Sandbox(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			return render(g.env.Stdout, output, sb, func(tw *tabwriter.Writer) {
				showTable(tw, g.env.Now(), sb)
				if sb.Purpose == "engineer" && sb.EndedAt == nil {
					showPorts(tw, classPorts(cmd.Context(), c, sb), sb.Name)
				}
			})
		},
	}
	outputFlag(cmd, &output)
	return cmd
}

func showTable(tw *tabwriter.Writer, now time.Time, sb api.Sandbox) {
	row := func(k, v string) {
		if v != "" {
			fmt.Fprintf(tw, "%s:\t%s\n", k, v)
		}
	}
	row("name", sb.Name)
	row("id", sb.ID)
	row("state", string(sb.State))
	row("reason", sb.Reason)
	row("purpose", sb.Purpose)
	row("owner", sb.OwnerName)
	row("class", sb.Class)
	row("image", sb.Image)
	row("isolation", sb.Isolation)
	row("machine", fmt.Sprintf("%s cores, %s memory", sb.CPU, sb.Memory))
	row("disk", sb.Disk)
	row("repository", sb.Repo)
	row("branch", sb.Branch)
	row("runner", sb.Runner)
	row("egress", sb.Egress)
	switch sb.Suspend {
	case api.SuspendMemory:
		row("suspend", "with its memory: its processes go on at resume")
	case api.SuspendStop:
		row("suspend", "stops its machine: its volume is kept, its processes end")
	}
	if sb.CheckpointBytes > 0 {
		row("saved memory", quantity.FormatMiB(quantity.Bytes(sb.CheckpointBytes).MiB()))
	}
	row("forked from", sb.ForkedFrom)
	row("created", sb.CreatedAt.Local().Format(time.RFC3339))
	if sb.EndedAt != nil {
		// An ended sandbox expires no more: say when it ended instead.
		row("ended", sb.EndedAt.Local().Format(time.RFC3339)+" ("+until(now, *sb.EndedAt)+")")
	} else {
		row("expires", sb.ExpiresAt.Local().Format(time.RFC3339)+" ("+until(now, sb.ExpiresAt)+")")
	}
	row("running time", short(time.Duration(sb.RunningSeconds)*time.Second))
	if sb.Purpose == "engineer" && sb.EndedAt == nil {
		row("connections", strconv.Itoa(sb.Connections))
	}
	if sb.LastActivity != nil {
		row("last activity", sb.LastActivity.Local().Format(time.RFC3339)+" ("+until(now, *sb.LastActivity)+")")
	}
	if sb.Run != nil {
		showRun(row, now, sb)
	}
}

// classPorts are the ports the sandbox's class names (a devcontainer's
// forwardPorts); none when the class is gone or cannot be read.
func classPorts(ctx context.Context, c *client.Client, sb api.Sandbox) []int {
	classes, err := c.Classes(ctx, "")
	if err != nil {
		return nil
	}
	for _, cl := range classes {
		if cl.Name == sb.Class {
			return cl.Ports
		}
	}
	return nil
}

// showPorts lists the ports to forward, with the command that does.
func showPorts(tw *tabwriter.Writer, ports []int, name string) {
	if len(ports) == 0 {
		return
	}
	ps := make([]string, len(ports))
	for i, p := range ports {
		ps[i] = strconv.Itoa(p)
	}
	fmt.Fprintf(tw, "ports:\t%s (berth sandbox forward %s %s)\n", strings.Join(ps, ", "), name, strings.Join(ps, " "))
}

// taskCost words what an agent's task cost in all (SPEC S8: its tokens
// and model cost plus its machine time): "11m of a 4-core machine (2640
// core-seconds), 41210 tokens, $0.3700". The tokens and money are the
// gateway's count when it metered the run, else the agent's.
func taskCost(sb api.Sandbox, r api.Run) string {
	ran := time.Duration(sb.RunningSeconds) * time.Second
	machine := fmt.Sprintf("%s of a %s-core machine", short(ran), sb.CPU)
	if cpu, err := quantity.ParseCPU(sb.CPU); err == nil {
		machine = fmt.Sprintf("%s of a %s-core machine (%s core-seconds)", short(ran),
			strconv.FormatFloat(cpu.Cores(), 'f', -1, 64), strconv.FormatFloat(cpu.Cores()*float64(sb.RunningSeconds), 'f', -1, 64))
	}
	u, money := r.Usage, agentCost(r)
	if m := r.Metered; m != nil {
		u, money = m.Usage, dollars(m.CostUSD)
	}
	tokens := u.Input + u.Output + u.CacheRead + u.CacheWrite
	return fmt.Sprintf("%s, %d tokens, %s", machine, tokens, money)
}

// showRun adds an agent run's rows to showTable's.
func showRun(row func(k, v string), now time.Time, sb api.Sandbox) {
	r := *sb.Run
	if sb.Session {
		row("session", fmt.Sprintf("task %d (berth sandbox runs %s lists them; berth sandbox task %s gives the next)", r.Seq, sb.Name, sb.Name))
	}
	row("run", string(r.State))
	end := now
	if r.EndedAt != nil {
		end = *r.EndedAt
	}
	row("wall time", short(end.Sub(r.StartedAt)))
	if r.ExitCode != nil {
		row("exit code", strconv.Itoa(*r.ExitCode))
	}
	if r.Ended != "" {
		// It never exited: say who ended it, not a code it never had.
		by := r.EndedBy
		if r.EndedByID != "" {
			by += " (" + r.EndedByID + ")"
		}
		row("ended", string(r.Ended)+" by "+by+", before the agent exited")
	}
	row("run error", r.Error)
	switch {
	case r.Commit != "":
		row("pushed", r.Branch+"@"+r.Commit[:min(len(r.Commit), 7)])
	case r.State == api.RunSucceeded:
		row("pushed", "nothing (no commit)")
	}
	u := r.Usage
	out := strconv.FormatInt(u.Output, 10) + " out"
	if u.Reasoning > 0 {
		out += fmt.Sprintf(" (%d reasoning)", u.Reasoning)
	}
	row("tokens", fmt.Sprintf("%d in, %s, %d cache read, %d cache write", u.Input, out, u.CacheRead, u.CacheWrite))
	if m := r.Metered; m != nil {
		// The gateway's count is the one budgets are charged; the agent's
		// own figure is beside it.
		row("cost", fmt.Sprintf("%s metered by the gateway (what budgets are charged); the agent's own: %s", dollars(m.CostUSD), agentCost(r)))
		row("metered", fmt.Sprintf("%d requests, %d in, %d out, %d cache read, %d cache write",
			m.Requests, m.Usage.Input, m.Usage.Output, m.Usage.CacheRead, m.Usage.CacheWrite))
	} else {
		row("cost", agentCost(r))
	}
	row("task", taskCost(sb, r))
	if r.MachineCostUSD != nil && r.TotalCostUSD != nil {
		models := "the models'"
		if sb.Session {
			models = "every task's models'"
		}
		row("cost in all", fmt.Sprintf("%s: %s and %s for the machine", dollars(*r.TotalCostUSD), models, dollars(*r.MachineCostUSD)))
	}
	if d := r.Difference; d != nil {
		row("difference", differsIn(*d)+": "+d.Summary)
		for _, c := range d.Causes {
			row("because", c.Message)
		}
		if len(d.Causes) == 0 {
			row("because", "berth cannot tell where it comes from")
		}
	}
	if v := r.Review; v != nil {
		row("review", v.Outcome)
		row("review best", v.Best)
		row("review summary", v.Summary)
		row("held because", v.Reason)
	}
	if len(r.Results) > 0 {
		keys := make([]string, 0, len(r.Results))
		for k := range r.Results {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			row("result "+k, r.Results[k])
		}
	}
	if len(r.EgressRefused) > 0 {
		row("egress refused", strings.Join(r.EgressRefused, ", ")+" (berth sandbox egress "+sb.Name+")")
	}
	row("model", r.Model)
	row("session", r.SessionID)
	if r.Turns > 0 {
		row("turns", strconv.Itoa(r.Turns))
	}
}

// agentCost words the cost an agent reported: "$0.0013 (native)", with
// what the CLI says it priced at, or "unknown", never a made-up zero.
func agentCost(r api.Run) string {
	if r.CostUSD == nil {
		return "unknown"
	}
	source := r.CostSource
	if r.PriceBasis != "" {
		source += ", cost basis " + r.PriceBasis
	}
	return dollars(*r.CostUSD) + " (" + source + ")"
}

// dollars words an amount to four places: "$0.0013", "under $0.0001".
func dollars(usd float64) string {
	if usd > 0 && usd < 0.0001 {
		return "under $0.0001"
	}
	return fmt.Sprintf("$%.4f", usd)
}

// differsIn says what of a run differs: "in tokens and cost".
func differsIn(d api.Difference) string {
	switch {
	case d.Tokens && d.Cost:
		return "in tokens and cost"
	case d.Tokens:
		return "in tokens"
	}
	return "in cost"
}

// newSandboxActionCmd builds suspend, resume and terminate, which differ
// only in the call they make. A command that leaves the sandbox starting
// (resume) waits for it as create does, unless --no-wait.
func newSandboxActionCmd(g *globals, verb, short string, call func(*client.Client, context.Context, string) (api.Sandbox, error)) *cobra.Command {
	var noWait bool
	var w waiting
	var output string
	cmd := &cobra.Command{
		Use:   verb + " NAME",
		Short: short,
		Args:  exactArgs(1, "a sandbox name or id"),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := g.client()
			if err != nil {
				return err
			}
			// -o json prints the sandbox as the gateway answers it, ended or not.
			if verb == "terminate" && output != "json" && alreadyTerminated(cmd.Context(), g.env, c, args[0]) {
				return nil
			}
			w.began = g.env.Now()
			sb, err := call(c, cmd.Context(), args[0])
			if err != nil {
				return err
			}
			if sb.State == api.StateStarting && !noWait {
				if sb, err = waitReady(cmd.Context(), g.env, c, sb, w); err != nil {
					return err
				}
			}
			if err := render(g.env.Stdout, output, sb, func(tw *tabwriter.Writer) {
				switch {
				case verb == "suspend" && sb.CheckpointBytes > 0:
					fmt.Fprintf(tw, "%s %s: %s with its memory (%s saved; resume goes on where it was)\n", sb.Name, sb.ID, sb.State,
						quantity.FormatMiB(quantity.Bytes(sb.CheckpointBytes).MiB()))
				case verb == "suspend" && sb.Suspend == api.SuspendMemory:
					fmt.Fprintf(tw, "%s %s: %s; its memory could not be saved, so it was stopped (resume starts it from its volume)\n", sb.Name, sb.ID, sb.State)
				default:
					fmt.Fprintf(tw, "%s %s: %s\n", sb.Name, sb.ID, sb.State)
				}
			}); err != nil {
				return err
			}
			if sb.State == api.StateFailed {
				fmt.Fprintf(g.env.Stderr, "%s failed: %s\n", sb.Name, sb.Reason)
				return exitError{code: 1}
			}
			return nil
		},
	}
	switch verb {
	case "suspend":
		cmd.Long = `Suspend a running engineer sandbox. Its volume is kept and its clock stops.
On the isolated tier (gVisor) on podman its memory is saved too: resume
restores its processes where they were (a build, a dev server, tmux). A
saved memory that cannot be restored falls back to a start from the
volume, which the audit log records. Elsewhere the machine stops and its
processes end. ` + "`berth sandbox show`" + ` says which a sandbox gets.`
	case "resume":
		cmd.Long = `Start a suspended or expired engineer sandbox again. One suspended with its
memory goes on where it was; otherwise it starts from its volume. After
expiry it gets a new key and starts from its volume.`
	}
	if verb == "resume" {
		cmd.Flags().BoolVar(&noWait, "no-wait", false, "return while the sandbox is still starting")
		cmd.Flags().DurationVar(&w.timeout, "timeout", 10*time.Minute, "how long to wait for it to run")
	}
	outputFlag(cmd, &output)
	return cmd
}

func newSandboxExtendCmd(g *globals) *cobra.Command {
	var ttl, output string
	var shorten bool
	cmd := &cobra.Command{
		Use:   "extend NAME",
		Short: "Give a sandbox a new lifetime, counted from now",
		Long: `Give a sandbox a new lifetime counted from now (default the class's), cut to
the class's and the guardrail's maximum; a warning says when it is cut, and
to what. A lifetime that would end sooner than the sandbox's current one is
refused (exit 1, nothing changes) unless --shorten says that is meant, as
kubectl refuses to overwrite without --overwrite: the same in a terminal and
in a script, which never waits for an answer. An expired sandbox must be
resumed first.`,
		Args: exactArgs(1, "a sandbox name or id"),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := g.client()
			if err != nil {
				return err
			}
			sb, err := c.ExtendWith(cmd.Context(), args[0], api.Extend{TTL: ttl, NoShorten: !shorten})
			if err != nil {
				return err
			}
			warnCut(g.env, sb)
			return render(g.env.Stdout, output, sb, func(tw *tabwriter.Writer) {
				fmt.Fprintf(tw, "%s %s: expires %s (%s)\n", sb.Name, sb.ID,
					sb.ExpiresAt.Local().Format(time.RFC3339), until(g.env.Now(), sb.ExpiresAt))
			})
		},
	}
	cmd.Flags().StringVar(&ttl, "ttl", "", "the new lifetime from now, such as 4h; default the class's")
	cmd.Flags().BoolVar(&shorten, "shorten", false, "apply a lifetime that ends sooner than the current one")
	outputFlag(cmd, &output)
	return cmd
}

func newClassesCmd(g *globals) *cobra.Command {
	var org, output string
	var limit int
	cmd := &cobra.Command{
		Use:   "classes",
		Short: "List the classes of your organisation and whether you could start each now",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := g.listClient(limit)
			if err != nil {
				return err
			}
			classes, err := c.Classes(cmd.Context(), org)
			if err != nil {
				return err
			}
			return render(g.env.Stdout, output, classes, func(tw *tabwriter.Writer) {
				fmt.Fprintln(tw, "NAME\tISOLATION\tCPU\tMEMORY\tDISK\tTTL\tMAX TTL\tSESSION IDLE\tPURPOSES\tSTARTABLE")
				for _, cl := range classes {
					purposes := strings.Join(cl.Purposes, ",")
					if purposes == "" {
						purposes = "both"
					}
					ok := "yes"
					if !cl.Startable {
						ok = "no: " + cl.Reason
					}
					fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", cl.Name, cl.Isolation, cl.CPU, cl.Memory,
						cl.Disk, cl.DefaultTTL, cl.MaxTTL, orDash(cl.SessionIdle), purposes, ok)
				}
			})
		},
	}
	cmd.Flags().StringVar(&org, "org", "", "organisation name or id (operators; default yours)")
	outputFlag(cmd, &output)
	limitFlag(cmd, &limit)
	return cmd
}

func newApplyCmd(g *globals) *cobra.Command {
	var org, file, output string
	cmd := &cobra.Command{
		Use:   "apply -f FILE",
		Short: "Create or change classes from a sandboxes file (administrators)",
		Long: `Create or change the classes a sandboxes file names (a YAML document with a
top-level sandboxes: list, the format of BERTH_SANDBOXES_FILE). The whole
file is checked first; if any entry is wrong nothing is applied, and every
problem is listed with its entry, field and the field's line. Classes the
file does not name are left alone.

The file holds at most 1 MiB, as written and with its YAML aliases
expanded, and at most 100 classes (an organisation too); each field has a
bound, such as 1 KiB for a description (README.md, Limits).`,
		Example: `  berth sandbox apply -f classes.yaml`,
		Args:    noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if file == "" {
				return usageError{errors.New("apply: -f FILE is required")}
			}
			b, err := readFile(g.env, file)
			if err != nil {
				return usageError{fmt.Errorf("-f: %w", err)}
			}
			c, err := g.client()
			if err != nil {
				return err
			}
			res, err := c.ApplyClasses(cmd.Context(), org, strings.NewReader(string(b)))
			if err != nil {
				return err
			}
			for _, w := range res.Warnings {
				fmt.Fprintf(g.env.Stderr, "warning: %s\n", w)
			}
			return render(g.env.Stdout, output, res, func(tw *tabwriter.Writer) {
				for _, n := range res.Created {
					fmt.Fprintf(tw, "class %s created\n", n)
				}
				for _, n := range res.Updated {
					fmt.Fprintf(tw, "class %s configured\n", n)
				}
			})
		},
	}
	outputFlag(cmd, &output)
	cmd.Flags().StringVarP(&file, "filename", "f", "", "the sandboxes file (- for standard input)")
	cmd.Flags().StringVar(&org, "org", "", "organisation name or id (operators; default yours)")
	return cmd
}

func newDeleteClassCmd(g *globals) *cobra.Command {
	var org string
	cmd := &cobra.Command{
		Use:   "delete-class NAME",
		Short: "Delete a class (administrators); its sandboxes keep working",
		Args:  exactArgs(1, "the class's name"),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := g.client()
			if err != nil {
				return err
			}
			if err := c.DeleteClass(cmd.Context(), org, args[0]); err != nil {
				return err
			}
			fmt.Fprintf(g.env.Stdout, "class %s deleted\n", args[0])
			return nil
		},
	}
	cmd.Flags().StringVar(&org, "org", "", "organisation name or id (operators; default yours)")
	return cmd
}
