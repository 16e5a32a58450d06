package cli

import (
	"fmt"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"berth.dev/berth/internal/api"
	"berth.dev/berth/internal/client"
	"berth.dev/berth/internal/quantity"
)

// orgOrMine returns org, or the caller's own organisation's id when empty.
func (g *globals) orgOrMine(cmd *cobra.Command, c *client.Client, org string) (string, error) {
	if org != "" {
		return org, nil
	}
	w, err := c.Whoami(cmd.Context())
	if err != nil {
		return "", err
	}
	return w.Organisation.ID, nil
}

// orgCall is what a command on one organisation works with: the client,
// the gateway's address it uses, and the organisation (--org as given, or
// the caller's own organisation's id).
type orgCall struct {
	c   *client.Client
	url string
	org string
}

// inOrg is the RunE of a command on one organisation, *org (its --org) or
// else the caller's own: it makes the client (given limit, --limit's
// value: a list's), finds the organisation and calls do.
func (g *globals) inOrg(org *string, limit *int, do func(cmd *cobra.Command, args []string, o orgCall) error) func(*cobra.Command, []string) error {
	return func(cmd *cobra.Command, args []string) error {
		c, url, err := g.clientAndURL()
		if err == nil && limit != nil {
			c, err = limited(c, *limit)
		}
		if err != nil {
			return err
		}
		o := orgCall{c: c, url: url}
		if o.org, err = g.orgOrMine(cmd, c, *org); err != nil {
			return err
		}
		return do(cmd, args, o)
	}
}

func newGuardrailCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:     "guardrail",
		Aliases: []string{"quota"},
		Short:   "Sandbox quotas of an organisation or a project",
		Long: `Sandbox quotas (guardrails) of an organisation or one of its projects.

An organisation's and a project's guardrails combine restrict-only: the
smaller of each ceiling, and the repositories both allow. A size ceiling
refuses a sandbox; a lifetime ceiling cuts it. An organisation's
administrators set its guardrail and its projects'; only an operator sets
an organisation's allowed repositories.`,
	}
	var org, project, output string
	show := &cobra.Command{
		Use:   "show",
		Short: "Show a guardrail as written",
		Args:  noArgs,
		RunE: g.inOrg(&org, nil, func(cmd *cobra.Command, _ []string, o orgCall) error {
			gr, err := o.c.Guardrail(cmd.Context(), o.org, project)
			if err != nil {
				return err
			}
			return render(g.env.Stdout, output, gr, func(tw *tabwriter.Writer) { guardrailTable(tw, gr) })
		}),
	}
	outputFlag(show, &output)

	var maxSandboxes, maxMemory, maxCPU, maxTTL, repos, egressFlag string
	set := &cobra.Command{
		Use:   "set",
		Short: "Change some fields of a guardrail, keeping the others",
		Long: `Change the fields given and keep every other field as it is: the guardrail
is read, changed and written back whole. "none" removes a limit.`,
		Example: `  berth guardrail set --max-sandboxes 10 --max-sandbox-memory 32Gi
  berth guardrail set --project ml --max-sandbox-cpu 8 --max-sandbox-ttl 8h
  berth guardrail set --allowed-repos acme,tools/ci      # operators, on an organisation
  berth guardrail set --max-sandboxes none
  berth guardrail set --project ml --egress registry.npmjs.org,*.pythonhosted.org`,
		Args: noArgs,
		RunE: g.inOrg(&org, nil, func(cmd *cobra.Command, _ []string, o orgCall) error {
			gr, err := o.c.Guardrail(cmd.Context(), o.org, project)
			if err != nil {
				return err
			}
			f := cmd.Flags()
			if f.Changed("max-sandboxes") {
				if gr.MaxSandboxes, err = intField("--max-sandboxes", maxSandboxes); err != nil {
					return err
				}
			}
			if f.Changed("max-sandbox-memory") {
				gr.MaxSandboxMemory = nil
				if maxMemory != "none" {
					if _, err := quantity.ParseMiB(maxMemory); err != nil {
						return usageError{fmt.Errorf("--max-sandbox-memory: %v, or none", err)}
					}
					m := api.Memory(maxMemory)
					gr.MaxSandboxMemory = &m
				}
			}
			if f.Changed("max-sandbox-cpu") {
				gr.MaxSandboxCPU = strField(maxCPU)
			}
			if f.Changed("max-sandbox-ttl") {
				gr.MaxSandboxTTL = strField(maxTTL)
			}
			if f.Changed("egress") {
				gr.Egress = nil
				if egressFlag != "unset" {
					gr.Egress = list(egressFlag)
				}
			}
			if f.Changed("allowed-repos") {
				gr.AllowedRepos = nil
				if repos != "none" {
					gr.AllowedRepos = list(repos)
					if gr.AllowedRepos == nil {
						gr.AllowedRepos = []string{}
					}
				}
			}
			gr, err = o.c.SetGuardrail(cmd.Context(), o.org, project, gr)
			if err != nil {
				return err
			}
			return render(g.env.Stdout, "table", gr, func(tw *tabwriter.Writer) { guardrailTable(tw, gr) })
		}),
	}
	set.Flags().StringVar(&maxSandboxes, "max-sandboxes", "", "live sandboxes at most (or none)")
	set.Flags().StringVar(&maxMemory, "max-sandbox-memory", "", "memory of one sandbox at most, as classes write it: 32Gi, 512Mi (a bare number is MiB), or none")
	set.Flags().StringVar(&maxCPU, "max-sandbox-cpu", "", "cores of one sandbox at most, such as 4 or 4000m (or none)")
	set.Flags().StringVar(&maxTTL, "max-sandbox-ttl", "", "lifetime of one sandbox at most, such as 8h or 7d (or none)")
	set.Flags().StringVar(&repos, "allowed-repos", "", "comma-separated forge paths (owner, owner/repo, or *); none unsets")
	set.Flags().StringVar(&egressFlag, "egress", "", "narrows agent sandboxes' egress: comma-separated hosts (name, *.domain, address or prefix, :PORT unless 443), none or open; unset narrows nothing")
	orgFlag(&org, show, set)
	for _, c := range []*cobra.Command{show, set} {
		c.Flags().StringVar(&project, "project", "", "a project's guardrail instead of the organisation's")
	}
	cmd.AddCommand(show, set)
	return cmd
}

func intField(flag, s string) (*int, error) {
	if s == "none" {
		return nil, nil
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 0 {
		return nil, usageError{fmt.Errorf("%s %q: want a whole number or none", flag, s)}
	}
	return &n, nil
}

func strField(s string) *string {
	if s == "none" {
		return nil
	}
	return &s
}

func guardrailTable(tw *tabwriter.Writer, g api.Guardrail) {
	num := func(p *int) string {
		if p == nil {
			return "no limit"
		}
		return strconv.Itoa(*p)
	}
	fmt.Fprintf(tw, "max-sandboxes\t%s\n", num(g.MaxSandboxes))
	mem := "no limit"
	if g.MaxSandboxMemory != nil {
		mem = string(*g.MaxSandboxMemory)
	}
	fmt.Fprintf(tw, "max-sandbox-memory\t%s\n", mem)
	str := func(p *string) string {
		if p == nil {
			return "no limit"
		}
		return *p
	}
	fmt.Fprintf(tw, "max-sandbox-cpu\t%s\n", str(g.MaxSandboxCPU))
	fmt.Fprintf(tw, "max-sandbox-ttl\t%s\n", str(g.MaxSandboxTTL))
	repos := "not set"
	if g.AllowedRepos != nil {
		repos = strings.Join(g.AllowedRepos, ", ")
		if repos == "" {
			repos = "(none)"
		}
	}
	fmt.Fprintf(tw, "allowed-repos\t%s\n", repos)
	egress := "not set"
	if g.Egress != nil {
		egress = strings.Join(g.Egress, ", ")
	}
	fmt.Fprintf(tw, "egress\t%s\n", egress)
}
