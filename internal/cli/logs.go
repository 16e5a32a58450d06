package cli

import (
	"fmt"
	"io"

	"github.com/spf13/cobra"
)

func newSandboxLogsCmd(g *globals) *cobra.Command {
	var follow bool
	cmd := &cobra.Command{
		Use:   "logs NAME",
		Short: "Print the log of an agent sandbox's run (-f to follow it until the run ends)",
		Long: `Print the log of an agent sandbox's run: every line the agent wrote, its
standard output (the runner's JSON events) as written and its standard
error prefixed "stderr: ". With --follow, keep printing what the run writes
until the run is over. An engineer sandbox has no run log.`,
		Example: `  berth sandbox logs fix-123
  berth sandbox logs -f fix-123`,
		Args: exactArgs(1, "a sandbox name or id"),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := g.client()
			if err != nil {
				return err
			}
			open := c.RunLog
			if follow {
				open = c.FollowRunLog
			}
			log, err := open(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			defer log.Close()
			if _, err := io.Copy(g.env.Stdout, log); err != nil {
				if cmd.Context().Err() != nil {
					return exitError{code: 130} // interrupted: how one stops following
				}
				return fmt.Errorf("the log of %s was cut off: %w", args[0], err)
			}
			return nil
		},
	}
	cmd.Flags().BoolVarP(&follow, "follow", "f", false, "keep printing what the run writes until it is over")
	return cmd
}
