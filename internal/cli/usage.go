package cli

import (
	"fmt"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"berth.dev/berth/internal/api"
	"berth.dev/berth/internal/client"
)

func newSandboxUsageCmd(g *globals) *cobra.Command {
	var o client.UsageOptions
	var output string
	var limit int
	cmd := &cobra.Command{
		Use:   "usage",
		Short: "What sandboxes ran, and for how long, by project, user or class (administrators)",
		Long: `Show what the sandboxes created in a window used, grouped by project, user
or class: how many were created, how many of them are live now, their
running time (the sum of their running segments, as H:MM:SS) and
core-seconds (running seconds by the sandbox's cores).

A sandbox counts whole in the window it was created in: all its running
time, however long ago it was suspended or resumed. Running time stops the
moment a sandbox is suspended, ends or expires, never runs past its
expiry, and runs on while the gateway is down (up to the expiry) unless
its machine stopped: then it stops when the machine did, as its runtime
tells it.

--since reaches back no further than BERTH_USAGE_RETENTION (default 90d),
after which ended sandboxes are deleted.

Administrators see their organisation's usage; operators every
organisation's, or one's with --org. Members are refused.

Requests, tokens and model cost are what the gateway itself metered of
the sandboxes' model calls (agent runs and engineers' alike), at the
models' prices: tokens in count the cached ones too.`,
		Example: `  berth sandbox usage
  berth sandbox usage --by user --since 7d
  berth sandbox usage --by class --org acme -o json`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := g.listClient(limit)
			if err != nil {
				return err
			}
			rep, err := c.Usage(cmd.Context(), o)
			if err != nil {
				return err
			}
			return render(g.env.Stdout, output, rep, func(tw *tabwriter.Writer) { usageTable(tw, rep) })
		},
	}
	cmd.Flags().StringVar(&o.By, "by", "project", "group by project, user or class")
	cmd.Flags().StringVar(&o.Since, "since", "", "the sandboxes created in this window back from now, such as 7d or 12h\n(default 30d, or the retention if shorter)")
	cmd.Flags().StringVar(&o.Org, "org", "", "organisation name or id (default yours; an operator's: every organisation)")
	outputFlag(cmd, &output)
	limitFlag(cmd, &limit)
	return cmd
}

func usageTable(tw *tabwriter.Writer, rep api.UsageReport) {
	all := rep.Organisation == ""
	cols := []string{strings.ToUpper(rep.By), "SANDBOXES", "LIVE", "RUNNING", "CORE-SECONDS", "REQUESTS", "TOKENS IN/OUT", "MODEL COST"}
	priced := rep.Total.CostUSD != nil // the deployment prices machine time
	if priced {
		cols = append(cols, "MACHINE COST", "COST")
	}
	if all {
		cols = append([]string{"ORGANISATION"}, cols...)
	}
	fmt.Fprintln(tw, strings.Join(cols, "\t"))
	row := func(org, name string, r api.UsageRow) {
		cells := []string{name, strconv.Itoa(r.Sandboxes), strconv.Itoa(r.Live), hms(r.RunningSeconds),
			strconv.FormatFloat(r.CoreSeconds, 'f', -1, 64), strconv.Itoa(r.Requests),
			fmt.Sprintf("%d/%d", r.Tokens.Input+r.Tokens.CacheRead+r.Tokens.CacheWrite, r.Tokens.Output),
			fmt.Sprintf("$%.4f", r.ModelCostUSD)}
		if priced && r.MachineCostUSD != nil && r.CostUSD != nil {
			cells = append(cells, fmt.Sprintf("$%.4f", *r.MachineCostUSD), fmt.Sprintf("$%.4f", *r.CostUSD))
		}
		if all {
			cells = append([]string{org}, cells...)
		}
		fmt.Fprintln(tw, strings.Join(cells, "\t"))
	}
	for _, r := range rep.Rows {
		row(r.OrganisationName, r.Name, r)
	}
	if all {
		row("TOTAL", "", rep.Total)
	} else {
		row("", "TOTAL", rep.Total)
	}
}

// hms prints seconds as hours, minutes and seconds: "3:40:00", "100:05:09".
func hms(secs int64) string {
	return fmt.Sprintf("%d:%02d:%02d", secs/3600, secs/60%60, secs%60)
}

func newAuditCmd(g *globals) *cobra.Command {
	var o client.AuditOptions
	var output string
	var limit int
	cmd := &cobra.Command{
		Use:   "audit",
		Short: "Who did what: the audit log (administrators)",
		Long: `Show the audit log, oldest first: every sandbox created, each state change
and extend (by whom, or by berth itself when the sweep did it), every key
minted or revoked (by id, never its secret), every invitation issued, used
or refused (with the client's address), classes applied or deleted,
guardrails set, and organisations, projects and users created.

Administrators see their organisation's log; operators every
organisation's, or one's with --org. Members are refused. Every event of
the window is shown (--limit N: the oldest N).`,
		Example: `  berth audit
  berth audit --sandbox dev --since 7d
  berth audit --org acme -o json`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := g.listClient(limit)
			if err != nil {
				return err
			}
			events, err := c.Audit(cmd.Context(), o)
			if err != nil {
				return err
			}
			if events == nil {
				events = []api.AuditEvent{}
			}
			return render(g.env.Stdout, output, events, func(tw *tabwriter.Writer) {
				fmt.Fprintln(tw, "TIME\tACTOR\tACTION\tSANDBOX\tTARGET\tOUTCOME\tDETAIL")
				for _, e := range events {
					actor := e.ActorName
					if e.Actor == "" {
						actor = "berth"
					}
					fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", e.At.Local().Format(time.RFC3339), orDash(actor), e.Action,
						orDash(e.Sandbox), orDash(e.Target), e.Outcome, e.Detail)
				}
			})
		},
	}
	cmd.Flags().StringVar(&o.Sandbox, "sandbox", "", "only what concerns this sandbox (a name, or an id: also of one since deleted)")
	cmd.Flags().StringVar(&o.Since, "since", "24h", "how far back, such as 7d or 30m")
	cmd.Flags().StringVar(&o.Org, "org", "", "organisation name or id (default yours; an operator's: every organisation)")
	outputFlag(cmd, &output)
	limitFlag(cmd, &limit)
	return cmd
}
