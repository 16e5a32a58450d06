package cli

import (
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"berth.dev/berth/internal/api"
	"berth.dev/berth/internal/quantity"
)

// newInferenceCmd is `berth project inference` (project true: it takes a
// project) and `berth org inference` (the organisation's own settings).
func newInferenceCmd(g *globals, project bool) *cobra.Command {
	what, args, use := "the organisation's", noArgs, ""
	if project {
		what, args, use = "a project's", exactArgs(1, "the project's name or id"), " PROJECT"
	}
	cmd := &cobra.Command{
		Use:   "inference",
		Short: "Models, budget, rate limit and system prompt of " + what + " inference (administrators)",
		Long: `What a key may do with models through the gateway (README, Inference). A sandbox's
key belongs to its sandbox's project; a user's key to the organisation's
default project. The organisation's settings and a project's combine
restrict-only: a model must be on both lists (a list not set narrows
nothing), both monthly budgets and both rate limits hold (the
organisation's across all its projects), and both system prompts are
prepended to every request, the organisation's first. Administrators only.`,
	}
	var org, output string
	// current reads the settings of the scope the command names.
	current := func(cmd *cobra.Command, args []string, o orgCall) (prj string, st api.InferenceStatus, err error) {
		if project {
			prj = args[0]
		}
		st, err = o.c.Inference(cmd.Context(), o.org, prj)
		return prj, st, err
	}
	show := &cobra.Command{
		Use:   "show" + use,
		Short: "Show " + what + " inference settings and this month's spend",
		Args:  args,
		RunE: g.inOrg(&org, nil, func(cmd *cobra.Command, args []string, o orgCall) error {
			_, st, err := current(cmd, args, o)
			if err != nil {
				return err
			}
			return render(g.env.Stdout, output, st, func(tw *tabwriter.Writer) { inferenceTable(tw, st) })
		}),
	}
	outputFlag(show, &output)

	var models, budget, rate, promptFile string
	set := &cobra.Command{
		Use:   "set" + use,
		Short: "Change some of " + what + " inference settings, keeping the others",
		Long: `Change the settings given and keep the others: they are read, changed and
written back whole. --models all lifts the allow-list, --models none
allows no model; --budget, --rate and --system-prompt-file take none to
clear them. The budget is US dollars per calendar month (UTC); the rate is
requests per period (60/m, 10/s, 1000/h, 5000/d).`,
		Example: `  berth project inference set ml --models claude-sonnet-4-5,gpt-5 --budget 25 --rate 60/m --system-prompt-file prompt.txt
  berth project inference set ml --budget none
  berth org inference set --models claude-sonnet-4-5,gpt-5,gpt-5-mini`,
		Args: args,
		RunE: g.inOrg(&org, nil, func(cmd *cobra.Command, args []string, o orgCall) error {
			prj, st, err := current(cmd, args, o)
			if err != nil {
				return err
			}
			s := st.Settings
			f := cmd.Flags()
			if f.Changed("models") {
				switch models {
				case "all":
					s.Models = nil
				case "none":
					s.Models = []string{}
				default:
					if s.Models = list(models); s.Models == nil {
						return usageError{fmt.Errorf("--models: want model names, all or none")}
					}
				}
			}
			if f.Changed("budget") {
				s.BudgetUSD = nil
				if budget != "none" {
					v, err := strconv.ParseFloat(strings.TrimPrefix(budget, "$"), 64)
					if err != nil || v < 0 {
						return usageError{fmt.Errorf("--budget %q: want US dollars, such as 25, or none", budget)}
					}
					s.BudgetUSD = &v
				}
			}
			if f.Changed("rate") {
				s.Rate = strField(rate)
			}
			if f.Changed("system-prompt-file") {
				s.SystemPrompt = ""
				if promptFile != "none" {
					b, err := readPrompt(g.env.Stdin, promptFile)
					if err != nil {
						return err
					}
					s.SystemPrompt = b
				}
			}
			st, err = o.c.SetInference(cmd.Context(), o.org, prj, s)
			if err != nil {
				return err
			}
			return render(g.env.Stdout, "table", st, func(tw *tabwriter.Writer) { inferenceTable(tw, st) })
		}),
	}
	set.Flags().StringVar(&models, "models", "", "comma-separated models the key may reach; all (no narrowing) or none")
	set.Flags().StringVar(&budget, "budget", "", "US dollars a calendar month, or none")
	set.Flags().StringVar(&rate, "rate", "", "requests per period, such as 60/m, or none")
	set.Flags().StringVar(&promptFile, "system-prompt-file", "", "a file (- for standard input) whose text every request carries, or none")
	orgFlag(&org, show, set)
	cmd.AddCommand(show, set)
	return cmd
}

// readPrompt reads a system prompt from a file or, for "-", stdin.
func readPrompt(stdin io.Reader, path string) (string, error) {
	var (
		b   []byte
		err error
	)
	if path == "-" {
		b, err = io.ReadAll(io.LimitReader(stdin, 1<<20))
	} else {
		b, err = os.ReadFile(path)
	}
	if err != nil {
		return "", fmt.Errorf("--system-prompt-file: %w", err)
	}
	return strings.TrimRight(string(b), "\n"), nil
}

func inferenceTable(tw *tabwriter.Writer, st api.InferenceStatus) {
	s := st.Settings
	scope := "organisation " + st.Organisation
	if st.Project != "" {
		scope = "project " + st.ProjectName
	}
	fmt.Fprintf(tw, "scope\t%s\n", scope)
	models := "all the gateway serves (not set)"
	if s.Models != nil {
		models = strings.Join(s.Models, ", ")
		if models == "" {
			models = "(none)"
		}
	}
	fmt.Fprintf(tw, "models\t%s\n", models)
	budget := "no budget"
	if s.BudgetUSD != nil {
		budget = quantity.USD(*s.BudgetUSD) + " a month"
	}
	fmt.Fprintf(tw, "budget\t%s\n", budget)
	fmt.Fprintf(tw, "spent\t%s in %s, %s held by requests in flight\n", quantity.USD(st.SpentUSD), st.Month.Format("2006-01"), quantity.USD(st.ReservedUSD))
	rate := "no limit"
	if s.Rate != nil {
		rate = *s.Rate
	}
	fmt.Fprintf(tw, "rate\t%s\n", rate)
	prompt := "none"
	if s.SystemPrompt != "" {
		first, _, _ := strings.Cut(s.SystemPrompt, "\n")
		if len(first) > 60 {
			first = first[:60] + "…"
		}
		prompt = fmt.Sprintf("%d bytes: %q", len(s.SystemPrompt), first)
	}
	fmt.Fprintf(tw, "system-prompt\t%s\n", prompt)
	reach := strings.Join(st.Reachable, ", ")
	if reach == "" {
		reach = "(none)"
	}
	fmt.Fprintf(tw, "reachable\t%s\n", reach)
}

// newModelCmd is `berth model`: what the caller's key may reach.
func newModelCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{Use: "model", Short: "Models the gateway serves to your key"}
	var output string
	var limit int
	list := &cobra.Command{
		Use:     "list",
		Aliases: []string{"ls"},
		Short:   "List the models your key may reach, chat models first, routers after, each by id",
		Args:    noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := g.listClient(limit)
			if err != nil {
				return err
			}
			ms, err := c.Models(cmd.Context())
			if err != nil {
				return err
			}
			return render(g.env.Stdout, output, ms, func(tw *tabwriter.Writer) {
				fmt.Fprintln(tw, "MODEL\tPROVIDER\tINPUT $/M\tOUTPUT $/M\tROUTES TO")
				for _, m := range ms {
					in, out := "-", "-"
					if m.Price != nil {
						in, out = strconv.FormatFloat(m.Price.Input, 'f', -1, 64), strconv.FormatFloat(m.Price.Output, 'f', -1, 64)
					}
					fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", m.ID, m.Provider, in, out, strings.Join(m.Router, ", "))
				}
			})
		},
	}
	outputFlag(list, &output)
	limitFlag(list, &limit)
	cmd.AddCommand(list)
	return cmd
}
