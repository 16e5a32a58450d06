package cli

import (
	"fmt"

	"github.com/spf13/cobra"

	"berth.dev/berth/internal/server"
)

func newAgentNetworkCmd(env Env) *cobra.Command {
	var bridge, subnet string
	var remove bool
	cmd := &cobra.Command{
		Use:   "agent-network",
		Short: "Make the allowlist network agent runs join (podman driver; needs root)",
		Long: `Make the network agent runs join by default (BERTH_AGENT_NETWORK=allowlist):
a podman network with no route out and no DNS, whose runs may reach this
host's gateway port (from BERTH_ADDR) and nothing else: not another host
service, not the internet, not another sandbox. It writes the network into
the podman driver's state (BERTH_SANDBOX_PODMAN_ROOT) and puts iptables rules
on its bridge. Run it again after a reboot or a change of port; it changes
only what differs.

Without the network, allowlist runs do not start: they fail closed.`,
		Example: `  sudo berth admin agent-network
  sudo berth admin agent-network --remove`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := hostConfig(cmd, env)
			if err != nil {
				return fmt.Errorf("agent-network: the gateway's settings are wrong:\n%w", err)
			}
			n, err := server.MakeAgentNetwork(cmd.Context(), cfg, bridge, subnet, remove)
			if err != nil {
				return fmt.Errorf("agent-network: %w", err)
			}
			if remove {
				fmt.Fprintln(env.Stdout, "removed the allowlist network")
				return nil
			}
			fmt.Fprintf(env.Stdout, "allowlist network %s: runs reach %s:%d (host.containers.internal) and nothing else\n", n.Name, n.Gateway, n.Port)
			return nil
		},
	}
	cmd.Flags().StringVar(&bridge, "bridge", "berth0", "the bridge interface's name")
	cmd.Flags().StringVar(&subnet, "subnet", "10.89.78.0/24", "the network's IPv4 subnet")
	cmd.Flags().BoolVar(&remove, "remove", false, "take the network and its rules away")
	return cmd
}
