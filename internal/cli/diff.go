package cli

import (
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"
)

func newSandboxDiffCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "diff NAME",
		Short: "Show what an agent sandbox's run changed: its pushed branch against its base",
		Long: `Show what an agent sandbox's run changed: git's stat and patch of the commit
its run pushed (branch berth/NAME) against where the run started (the
sandbox's branch, or the repository's default). A run that has pushed
nothing yet (it is still running, it failed, or it committed nothing) says
so on standard error and prints no diff. The branch is in the repository:
git fetch it to work on it.`,
		Example: `  berth sandbox diff fix-123
  berth sandbox diff fix-123 | less -R`,
		Args: exactArgs(1, "a sandbox name or id"),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := g.client()
			if err != nil {
				return err
			}
			d, err := c.RunDiff(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			if d.Commit == "" {
				sb, err := c.Sandbox(cmd.Context(), args[0])
				if err != nil {
					return err
				}
				state := "no run"
				if sb.Run != nil {
					state = "its run " + string(sb.Run.State)
				}
				fmt.Fprintf(g.env.Stderr, "%s pushed nothing (%s): no diff to show. berth sandbox logs %s shows what the run did.\n", sb.Name, state, sb.Name)
				return nil
			}
			fmt.Fprintf(g.env.Stderr, "%s at %s, against where the run started:\n", d.Branch, shortCommit(d.Commit))
			if _, err := io.WriteString(g.env.Stdout, d.Diff); err != nil {
				return err
			}
			if d.Cut {
				fmt.Fprintf(g.env.Stderr, "the diff stops here, cut by the gateway: git fetch %s to see it whole\n", d.Branch)
			}
			if strings.TrimSpace(d.Diff) == "" {
				fmt.Fprintf(g.env.Stderr, "the commit changes no file\n")
			}
			return nil
		},
	}
}

// short is a commit id as git shows it.
func shortCommit(commit string) string { return commit[:min(len(commit), 12)] }
