package cli

import (
	"errors"
	"fmt"
	"io"
	"os"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"berth.dev/berth/internal/api"
)

// maxInstructionsFile bounds what --instructions-file reads: the gateway's
// limit and a byte more, so that over it is refused, not cut.
const maxInstructionsFile = 64<<10 + 1

func newAgentConfigCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "agent-config",
		Short: "The instructions, effort and model an organisation's or a project's agent runs start with",
		Long: `The agent configuration of an organisation or one of its projects: the
user-level instructions (an AGENTS.md text) its agent runs read, the
reasoning effort they start with, and the model they start on when their
create names none (if the project may reach it in an API the runner
speaks; else the deployment's). A run's is the organisation's and its
project's together: the instructions concatenated, the organisation's
first; the project's effort and model over the organisation's. berth writes the
instructions where each runner's CLI reads its user-level instructions
(Claude Code's ~/.claude/CLAUDE.md, Codex's ~/.codex/AGENTS.md, Gemini
CLI's ~/.gemini/GEMINI.md, OpenCode's ~/.config/opencode/AGENTS.md, Pi's
~/.pi/agent/AGENTS.md), never into the checkout, and hands a kelos image
KELOS_AGENTS_MD and KELOS_EFFORT. Administrators set it; every change is in
the audit log.`,
	}
	var org, project, output string
	show := &cobra.Command{
		Use:   "show",
		Short: "Show an agent configuration as written",
		Args:  noArgs,
		RunE: g.inOrg(&org, nil, func(cmd *cobra.Command, _ []string, o orgCall) error {
			c, err := o.c.AgentConfig(cmd.Context(), o.org, project)
			if err != nil {
				return err
			}
			return render(g.env.Stdout, output, c, func(tw *tabwriter.Writer) {
				fmt.Fprintf(tw, "effort:\t%s\n", orDash(c.Effort))
				fmt.Fprintf(tw, "model:\t%s\n", orDash(c.Model))
				if c.UpdatedAt != nil {
					fmt.Fprintf(tw, "updated:\t%s by %s\n", c.UpdatedAt.Local().Format(time.RFC3339), c.UpdatedBy)
				}
				fmt.Fprintf(tw, "instructions:\t%d bytes\n", len(c.Instructions))
				tw.Flush()
				if c.Instructions != "" {
					fmt.Fprintf(g.env.Stdout, "\n%s", c.Instructions)
				}
			})
		}),
	}
	outputFlag(show, &output)

	var file, effort, model string
	var clear bool
	set := &cobra.Command{
		Use:   "set",
		Short: "Change an agent configuration's instructions or effort, keeping the other",
		Example: `  berth agent-config set --instructions-file AGENTS.md
  berth agent-config set --project web --effort high
  git show main:AGENTS.md | berth agent-config set --project web --instructions-file -`,
		Args: noArgs,
		RunE: g.inOrg(&org, nil, func(cmd *cobra.Command, _ []string, o orgCall) error {
			if file == "" && !cmd.Flags().Changed("effort") && !cmd.Flags().Changed("model") && !clear {
				return usageError{errors.New("nothing to set: give --instructions-file, --effort, --model or --clear-instructions")}
			}
			c, err := o.c.AgentConfig(cmd.Context(), o.org, project)
			if err != nil {
				return err
			}
			in := api.AgentConfig{Instructions: c.Instructions, Effort: c.Effort, Model: c.Model}
			switch {
			case clear && file != "":
				return usageError{errors.New("--clear-instructions and --instructions-file: give one")}
			case clear:
				in.Instructions = ""
			case file != "":
				if in.Instructions, err = readInstructions(g, file); err != nil {
					return err
				}
			}
			if cmd.Flags().Changed("effort") {
				in.Effort = effort
			}
			if cmd.Flags().Changed("model") {
				in.Model = model
			}
			out, err := o.c.SetAgentConfig(cmd.Context(), o.org, project, in)
			if err != nil {
				return err
			}
			fmt.Fprintf(g.env.Stdout, "agent configuration set: instructions %d bytes, effort %s, model %s\n", len(out.Instructions), orDash(out.Effort), orDash(out.Model))
			return nil
		}),
	}
	set.Flags().StringVar(&file, "instructions-file", "", "read the instructions from a file (- for standard input), at most 64 KiB")
	set.Flags().BoolVar(&clear, "clear-instructions", false, "remove the instructions")
	set.Flags().StringVar(&effort, "effort", "", "low, medium or high; empty leaves it to each CLI")
	set.Flags().StringVar(&model, "model", "", "the model runs start on when their create names none (berth model list); empty: the deployment's")
	for _, c := range []*cobra.Command{show, set} {
		c.Flags().StringVar(&project, "project", "", "a project's configuration instead of the organisation's")
	}
	orgFlag(&org, show, set)
	cmd.AddCommand(show, set)
	return cmd
}

// readInstructions reads an instructions file, or standard input for -.
func readInstructions(g *globals, file string) (string, error) {
	var r io.Reader = g.env.Stdin
	if file != "-" {
		f, err := os.Open(file)
		if err != nil {
			return "", usageError{fmt.Errorf("--instructions-file: %w", err)}
		}
		defer f.Close()
		r = f
	}
	b, err := io.ReadAll(io.LimitReader(r, maxInstructionsFile))
	if err != nil {
		return "", fmt.Errorf("--instructions-file: %w", err)
	}
	if len(b) >= maxInstructionsFile {
		return "", usageError{fmt.Errorf("--instructions-file: over %d bytes, the most a configuration holds", maxInstructionsFile-1)}
	}
	return string(b), nil
}
