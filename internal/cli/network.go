package cli

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"berth.dev/berth/internal/driver/podman"
)

func newAgentNetworkCmd(env Env) *cobra.Command {
	var a podman.Allowlist
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
			cfg, err := LoadConfig(env.Getenv)
			if err != nil {
				return fmt.Errorf("agent-network: the gateway's settings are wrong:\n%w", err)
			}
			if cfg.Driver != "podman" {
				return fmt.Errorf("agent-network: BERTH_SANDBOX_DRIVER is %q; the allowlist network is the podman driver's", cfg.Driver)
			}
			port, err := strconv.Atoi(strings.TrimPrefix(portOf(cfg.Addr), ":"))
			if err != nil {
				return fmt.Errorf("agent-network: BERTH_ADDR %q names no port", cfg.Addr)
			}
			a.Port = port
			pc := podmanConfig(cfg)
			if err := pc.WriteConfig(); err != nil {
				return err
			}
			if remove {
				if err := pc.RemoveAllowlist(cmd.Context(), a); err != nil {
					return fmt.Errorf("agent-network: %w", err)
				}
				fmt.Fprintln(env.Stdout, "removed the allowlist network")
				return nil
			}
			if err := pc.CreateAllowlist(cmd.Context(), a); err != nil {
				return fmt.Errorf("agent-network: %w", err)
			}
			gw, _ := a.Gateway()
			fmt.Fprintf(env.Stdout, "allowlist network %s: runs reach %s:%d (host.containers.internal) and nothing else\n", pc.AgentNetworkName(), gw, port)
			return nil
		},
	}
	cmd.Flags().StringVar(&a.Bridge, "bridge", "berth0", "the bridge interface's name")
	cmd.Flags().StringVar(&a.Subnet, "subnet", "10.89.78.0/24", "the network's IPv4 subnet")
	cmd.Flags().BoolVar(&remove, "remove", false, "take the network and its rules away")
	return cmd
}
