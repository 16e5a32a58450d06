package cli

import (
	"errors"
	"fmt"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"berth.dev/berth/internal/api"
)

// maxTaskFile bounds a task template (the gateway's limit).
const maxTaskFile = 16 << 10

func newTriggerCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "trigger",
		Short: "A project's triggers: agent runs started by forge events and webhooks",
		Long: `A project's triggers. A trigger starts an agent sandbox on its repository
when its forge says an issue (or pull request) was labelled, or a comment
starts with a command, or when a signed generic webhook arrives. Each
delivery is handed to a trigger once: a redelivery starts nothing. A schedule's trigger fires once per
due time, whichever replica sees it first (once for the latest after
the gateway was down). A
trigger runs at most --concurrency runs at once and skips deliveries past
its daily budget, saying why (berth trigger show). Its runs are ordinary
agent sandboxes of the administrator who set it last.

After a clean author run the gateway opens a draft pull request (GitHub)
or merge request (GitLab) from berth/<name> to the base branch, with the
run's summary, cost and refused egress hosts, and comments on the issue
that started it; a failed run's comment says why, and a reviewer's run
posts its verdict. The container never talks to the forge.

Where deliveries go:
  github   the GitHub App's webhook, at /hooks/v1/github, signed with
           BERTH_SANDBOX_GIT_WEBHOOK_SECRET_FILE's secret
  gitlab   a project webhook at the trigger's hook URL, with the
           trigger's secret as its secret token
  webhook  POST to the trigger's hook URL with X-Berth-Delivery,
           X-Berth-Timestamp (unix seconds) and X-Berth-Signature-256:
           sha256=HMAC-SHA256(secret, timestamp "." delivery "." body), body a
           JSON object`,
	}
	var org, project string
	var in api.Trigger
	var taskFile string
	var noPR bool
	set := &cobra.Command{
		Use:   "set NAME --on EVENT --repo REPO",
		Short: "Set a trigger (again to change it, keeping its hook URL and secret)",
		Long: `Set a trigger of the project. --on is one of:
  github:labeled:LABEL     an issue or pull request got LABEL
  github:comment:COMMAND   a comment's first line starts with COMMAND
  gitlab:labeled:LABEL, gitlab:comment:COMMAND   the same on GitLab
  webhook                  a signed generic webhook
  schedule:CRON            a cron schedule (five fields, names, @daily…;
                           CRON_TZ=Zone first for another zone than UTC);
                           its task is --task-file's, with .Time

The task is a Go text/template over the event: .Title, .Body, .URL,
.Number, .Comment, .Args (what follows the command), .Label, .Author,
.Repo and .Payload (a generic webhook's JSON object). Without
--task-file it is the thread's title, text, arguments and address.

With --session each run is a session (berth sandbox task --help): it stays
after its task, and a review of the pull request it opened (a comment on
its diff, or a submitted review with a text), or a comment on that pull
request starting with /berth, becomes its next task; the agent goes on
from where it was, pushes on top, and comments there with its summary and
cost. A review that comes while a task still runs is refused with a
comment saying so; the same delivery twice starts one task.`,
		Example: `  berth trigger set fix --on github:labeled:berth --repo acme/api --class agent
  berth trigger set ask --on github:comment:'/berth run' --repo acme/api --concurrency 2 --daily-usd 20
  berth trigger set deploy --on webhook --repo acme/api --task-file deploy.tmpl --no-pr
  berth trigger set nightly --on 'schedule:0 3 * * 1-5' --repo acme/api --task-file nightly.md`,
		Args: exactArgs(1, "the trigger's name"),
		RunE: g.inOrg(&org, nil, func(cmd *cobra.Command, args []string, o orgCall) error {
			if in.On == "" {
				return usageError{errors.New("--on: say what starts a run (github:labeled:LABEL, github:comment:COMMAND, gitlab:…, webhook, schedule:CRON)")}
			}
			if in.Repo == "" {
				return usageError{errors.New("--repo: name the repository its runs work on")}
			}
			if taskFile != "" {
				b, err := readInput(g, "task-file", taskFile, maxTaskFile)
				if err != nil {
					return err
				}
				in.Task = b
			}
			if cmd.Flags().Changed("no-pr") {
				open := !noPR
				in.OpenPR = &open
			}
			t, err := o.c.SetTrigger(cmd.Context(), o.org, projectOrDefault(project), args[0], in)
			if err != nil {
				return err
			}
			fmt.Fprintf(g.env.Stdout, "trigger %s is set: on %s, repo %s\n", t.Name, t.On, t.Repo)
			if t.NextAt != nil {
				fmt.Fprintf(g.env.Stdout, "next:     %s\n", t.NextAt.Local().Format(time.RFC3339))
			}
			if t.HookURL != "" {
				fmt.Fprintf(g.env.Stdout, "hook URL: %s\n", t.HookURL)
			}
			if t.Secret != "" {
				fmt.Fprintf(g.env.Stdout, "secret:   %s\n", t.Secret)
			}
			return nil
		}),
	}
	f := set.Flags()
	f.StringVar(&in.On, "on", "", "what starts a run: github:labeled:L, github:comment:C, gitlab:…, webhook, schedule:CRON")
	f.StringVar(&in.Repo, "repo", "", "the repository its runs work on (allowed_repos applies)")
	f.StringVar(&in.Base, "base", "", "the branch runs check out and pull requests go to (default: the repository's default)")
	f.StringVar(&in.Class, "class", "", "the class of its sandboxes (default: the organisation's agent class)")
	f.StringVar(&in.Runner, "runner", "", "the runner (default: the deployment's)")
	f.StringVar(&in.Model, "model", "", "the model runs start on (default: chosen as for any run)")
	f.StringVar(&in.Role, "role", "", "author (default) or reviewer")
	f.StringVar(&taskFile, "task-file", "", "the task template (- for standard input)")
	f.IntVar(&in.Concurrency, "concurrency", 1, "how many of its runs may be live at once; more are skipped")
	f.Int64Var(&in.DailyTokens, "daily-tokens", 0, "skip deliveries once its runs today used this many tokens (0: no limit)")
	f.Float64Var(&in.DailyUSD, "daily-usd", 0, "skip deliveries once its runs today cost this many dollars, machine time included (0: no limit)")
	f.BoolVar(&noPR, "no-pr", false, "open no pull request after a clean run (a person opens it)")
	f.BoolVar(&in.Session, "session", false, "its runs are sessions: a review of the pull request a run opened (or a comment there starting /berth) is that run's next task")

	var output string
	list := &cobra.Command{
		Use:   "list",
		Short: "List a project's triggers",
		Args:  noArgs,
		RunE: g.inOrg(&org, nil, func(cmd *cobra.Command, _ []string, o orgCall) error {
			ts, err := o.c.Triggers(cmd.Context(), o.org, projectOrDefault(project))
			if err != nil {
				return err
			}
			return render(g.env.Stdout, output, ts, func(tw *tabwriter.Writer) {
				fmt.Fprintln(tw, "NAME\tON\tREPO\tCONCURRENCY\tDAILY BUDGET\tOPENS PR")
				for _, t := range ts {
					fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%s\n", t.Name, t.On, t.Repo, t.Concurrency, budget(t), yesNo(t.OpenPR != nil && *t.OpenPR))
				}
			})
		}),
	}
	outputFlag(list, &output)

	show := &cobra.Command{
		Use:   "show NAME",
		Short: "Show a trigger and what became of its latest deliveries",
		Args:  exactArgs(1, "the trigger's name"),
		RunE: g.inOrg(&org, nil, func(cmd *cobra.Command, args []string, o orgCall) error {
			t, err := o.c.Trigger(cmd.Context(), o.org, projectOrDefault(project), args[0])
			if err != nil {
				return err
			}
			return render(g.env.Stdout, output, t, func(tw *tabwriter.Writer) {
				fmt.Fprintf(tw, "name:\t%s\non:\t%s\nrepo:\t%s\n", t.Name, t.On, t.Repo)
				fmt.Fprintf(tw, "class:\t%s\nrunner:\t%s\nrole:\t%s\n", orDash(t.Class), orDash(t.Runner), orDash(t.Role))
				fmt.Fprintf(tw, "concurrency:\t%d\ndaily budget:\t%s\nopens PR:\t%s\nsessions:\t%s\n", t.Concurrency, budget(t), yesNo(t.OpenPR != nil && *t.OpenPR), yesNo(t.Session))
				if t.NextAt != nil {
					fmt.Fprintf(tw, "next:\t%s\n", t.NextAt.Local().Format(time.RFC3339))
				}
				if t.HookURL != "" {
					fmt.Fprintf(tw, "hook URL:\t%s\n", t.HookURL)
				}
				if t.Secret != "" {
					fmt.Fprintf(tw, "secret:\t%s\n", t.Secret)
				}
				fmt.Fprintln(tw)
				fmt.Fprintln(tw, "DELIVERY\tAT\tOUTCOME\tSANDBOX\tREASON")
				for _, d := range t.Deliveries {
					fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", d.ID, d.At.Local().Format(time.RFC3339), d.Outcome, orDash(d.Sandbox), d.Reason)
				}
			})
		}),
	}
	outputFlag(show, &output)

	del := &cobra.Command{
		Use:   "delete NAME",
		Short: "Delete a trigger: its hook URL stops answering; its runs go on",
		Args:  exactArgs(1, "the trigger's name"),
		RunE: g.inOrg(&org, nil, func(cmd *cobra.Command, args []string, o orgCall) error {
			if err := o.c.DeleteTrigger(cmd.Context(), o.org, projectOrDefault(project), args[0]); err != nil {
				return err
			}
			fmt.Fprintf(g.env.Stdout, "trigger %s is deleted\n", args[0])
			return nil
		}),
	}
	for _, c := range []*cobra.Command{set, list, show, del} {
		c.Flags().StringVar(&project, "project", "", "the project (default: default)")
	}
	orgFlag(&org, set, list, show, del)
	cmd.AddCommand(set, list, show, del)
	return cmd
}

func budget(t api.Trigger) string {
	var parts []string
	if t.DailyTokens > 0 {
		parts = append(parts, fmt.Sprintf("%d tokens", t.DailyTokens))
	}
	if t.DailyUSD > 0 {
		parts = append(parts, fmt.Sprintf("$%.2f", t.DailyUSD))
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ")
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}
