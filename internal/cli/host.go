package cli

import (
	"fmt"

	"github.com/spf13/cobra"

	"berth.dev/berth/internal/server"
)

func newServeCmd(env Env) *cobra.Command {
	return &cobra.Command{
		Use:   "serve",
		Short: "Run the gateway",
		Long: `Run the gateway: the API, the sandbox driver and the sweep.

It reads its settings from BERTH_* environment variables once, and refuses
to start, naming the setting, when one is wrong.

` + server.SettingsHelp,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := server.LoadConfig(env.Getenv)
			if err != nil {
				return fmt.Errorf("refusing to start:\n%w", err)
			}
			return server.Serve(cmd.Context(), cfg, server.NewLogger(env.Stderr, cfg.LogLevel), env.Serve...)
		},
	}
}
