package cli

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"berth.dev/berth/internal/api"
	"berth.dev/berth/internal/runner"
)

// maxInstructionsFile bounds what --instructions-file reads: the gateway's
// limit.
const maxInstructionsFile = 64 << 10

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
KELOS_AGENTS_MD and KELOS_EFFORT.

Skills (the Agent Skills layout: a directory per skill whose SKILL.md
says what it is for) go where each CLI reads user-level skills: uploaded
with --skills-dir (at most 16 skills, 32 KiB of files together), or taken
from a directory of the run's repository (--skills-path) when the run
starts. MCP servers (--mcp NAME='COMMAND ARG…' for a program in the image,
or NAME=https://… for a remote one, reached through the egress policy) go
into each CLI's configuration; Pi takes none. A run's skills and servers are
the organisation's and its project's, the project's over the
organisation's of the same name. Administrators set it; every change is in
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
				var skills []string
				for _, sk := range c.Skills {
					skills = append(skills, sk.Name)
				}
				fmt.Fprintf(tw, "skills:\t%s\n", orDash(strings.Join(skills, ", ")))
				fmt.Fprintf(tw, "skills path:\t%s\n", orDash(c.SkillsPath))
				for _, m := range c.MCP {
					fmt.Fprintf(tw, "MCP server:\t%s = %s%s\n", m.Name, strings.Join(m.Command, " "), m.URL)
				}
				pr := c.PullRequests
				if pr == "" {
					pr = "on"
				}
				fmt.Fprintf(tw, "pull requests:\t%s\n", pr)
				fmt.Fprintf(tw, "instructions:\t%d bytes\n", len(c.Instructions))
				tw.Flush()
				if c.Instructions != "" {
					fmt.Fprintf(g.env.Stdout, "\n%s", c.Instructions)
				}
			})
		}),
	}
	outputFlag(show, &output)

	var file, effort, model, skillsDir, skillsPath, pullRequests string
	var mcp []string
	var clear, clearSkills, clearMCP bool
	set := &cobra.Command{
		Use:   "set",
		Short: "Change an agent configuration's instructions or effort, keeping the other",
		Example: `  berth agent-config set --instructions-file AGENTS.md
  berth agent-config set --project web --effort high
  berth agent-config set --skills-dir ./skills --mcp 'docs=python3 /opt/mcp/docs.py'
  berth agent-config set --project web --skills-path .berth/skills --mcp tracker=https://mcp.tracker.example/mcp
  git show main:AGENTS.md | berth agent-config set --project web --instructions-file -`,
		Args: noArgs,
		RunE: g.inOrg(&org, nil, func(cmd *cobra.Command, _ []string, o orgCall) error {
			if cmd.Flags().NFlag() == len(flagsSet(cmd, "org", "project")) {
				return usageError{errors.New("nothing to set: give --instructions-file, --effort, --model, --skills-dir, --skills-path, --mcp or a --clear-… flag")}
			}
			c, err := o.c.AgentConfig(cmd.Context(), o.org, project)
			if err != nil {
				return err
			}
			// Written whole: what is not changed is sent back as it was.
			in := api.AgentConfig{Instructions: c.Instructions, Effort: c.Effort, Model: c.Model, Skills: c.Skills, SkillsPath: c.SkillsPath, MCP: c.MCP,
				PullRequests: c.PullRequests}
			switch {
			case clearSkills && skillsDir != "":
				return usageError{errors.New("--clear-skills and --skills-dir: give one")}
			case clearSkills:
				in.Skills = nil
			case skillsDir != "":
				if in.Skills, err = readSkills(skillsDir); err != nil {
					return err
				}
			}
			if cmd.Flags().Changed("skills-path") {
				in.SkillsPath = skillsPath
			}
			if cmd.Flags().Changed("pull-requests") {
				in.PullRequests = pullRequests
			}
			switch {
			case clearMCP && len(mcp) > 0:
				return usageError{errors.New("--clear-mcp and --mcp: give one")}
			case clearMCP:
				in.MCP = nil
			case len(mcp) > 0:
				if in.MCP, err = parseMCP(mcp); err != nil {
					return err
				}
			}
			switch {
			case clear && file != "":
				return usageError{errors.New("--clear-instructions and --instructions-file: give one")}
			case clear:
				in.Instructions = ""
			case file != "":
				if in.Instructions, err = readInput(g, "instructions-file", file, maxInstructionsFile); err != nil {
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
			fmt.Fprintf(g.env.Stdout, "agent configuration set: instructions %d bytes, effort %s, model %s, %d skills, %d MCP servers\n",
				len(out.Instructions), orDash(out.Effort), orDash(out.Model), len(out.Skills), len(out.MCP))
			return nil
		}),
	}
	set.Flags().StringVar(&file, "instructions-file", "", "read the instructions from a file (- for standard input), at most 64 KiB")
	set.Flags().BoolVar(&clear, "clear-instructions", false, "remove the instructions")
	set.Flags().StringVar(&effort, "effort", "", "low, medium or high; empty leaves it to each CLI")
	set.Flags().StringVar(&model, "model", "", "the model runs start on when their create names none (berth model list); empty: the deployment's")
	set.Flags().StringVar(&skillsDir, "skills-dir", "", "upload the skills in DIR (DIR/<skill>/SKILL.md, or a plugin's DIR/skills/<skill>/…), replacing those uploaded before")
	set.Flags().BoolVar(&clearSkills, "clear-skills", false, "remove the uploaded skills")
	set.Flags().StringVar(&skillsPath, "skills-path", "", "a directory of the run's repository whose subdirectories are skills (empty: none)")
	set.Flags().StringArrayVar(&mcp, "mcp", nil, "an MCP server, NAME='COMMAND ARG…' or NAME=https://… (repeat; replaces the list)")
	set.Flags().BoolVar(&clearMCP, "clear-mcp", false, "remove the MCP servers")
	set.Flags().StringVar(&pullRequests, "pull-requests", "", "off: no run opens a pull request (a person opens it from the branch); on or empty: triggers and --open-pr do")
	for _, c := range []*cobra.Command{show, set} {
		c.Flags().StringVar(&project, "project", "", "a project's configuration instead of the organisation's")
	}
	orgFlag(&org, show, set)
	cmd.AddCommand(show, set)
	return cmd
}

// readInput reads what a file flag names, or standard input for -, at
// most limit bytes: over it is refused, not cut.
func readInput(g *globals, flag, file string, limit int) (string, error) {
	var r io.Reader = g.env.Stdin
	if file != "-" {
		f, err := os.Open(file)
		if err != nil {
			return "", usageError{fmt.Errorf("--%s: %w", flag, err)}
		}
		defer f.Close()
		r = f
	}
	b, err := io.ReadAll(io.LimitReader(r, int64(limit)+1))
	if err != nil {
		return "", fmt.Errorf("--%s: %w", flag, err)
	}
	if len(b) > limit {
		return "", usageError{fmt.Errorf("--%s: over %d bytes, the most it may hold", flag, limit)}
	}
	return string(b), nil
}

// flagsSet are the names among names whose flags cmd was given.
func flagsSet(cmd *cobra.Command, names ...string) []string {
	var out []string
	for _, n := range names {
		if f := cmd.Flags().Lookup(n); f != nil && f.Changed {
			out = append(out, n)
		}
	}
	return out
}

// readSkills reads DIR's skills (of a plugin, those of DIR/skills) as
// the gateway takes them: each subdirectory with a SKILL.md, its regular
// files, no link followed, within the runner's limits.
func readSkills(dir string) ([]api.AgentSkill, error) {
	if st, err := os.Stat(filepath.Join(dir, "skills")); err == nil && st.IsDir() {
		dir = filepath.Join(dir, "skills")
	}
	skills, err := runner.ReadSkills(os.DirFS(dir), ".")
	if err == nil {
		err = runner.CheckSkills(skills)
	}
	if err != nil {
		return nil, usageError{fmt.Errorf("--skills-dir: %w", err)}
	}
	if len(skills) == 0 {
		return nil, usageError{fmt.Errorf("--skills-dir: %s has no <skill>/SKILL.md", dir)}
	}
	out := make([]api.AgentSkill, 0, len(skills))
	for _, sk := range skills {
		files := map[string]string{}
		for _, f := range sk.Files {
			files[f.Path] = string(f.Content)
		}
		out = append(out, api.AgentSkill{Name: sk.Name, Files: files})
	}
	return out, nil
}

// parseMCP reads --mcp's NAME=URL and NAME='COMMAND ARG…' (arguments
// split at spaces; no quoting).
func parseMCP(specs []string) ([]api.MCPServer, error) {
	var out []api.MCPServer
	for _, s := range specs {
		name, rest, ok := strings.Cut(s, "=")
		rest = strings.TrimSpace(rest)
		if !ok || name == "" || rest == "" {
			return nil, usageError{fmt.Errorf("--mcp %q: NAME='COMMAND ARG…' or NAME=https://…", s)}
		}
		m := api.MCPServer{Name: name}
		if strings.HasPrefix(rest, "https://") || strings.HasPrefix(rest, "http://") {
			m.URL = rest
		} else {
			m.Command = strings.Fields(rest)
		}
		out = append(out, m)
	}
	return out, nil
}
