package cli

import (
	"fmt"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"berth.dev/berth/internal/api"
)

func newSandboxEgressCmd(g *globals) *cobra.Command {
	var (
		output   string
		asPolicy bool
	)
	cmd := &cobra.Command{
		Use:   "egress NAME",
		Short: "Show where a sandbox went out to through the gateway's egress proxy",
		Long: `Show where a sandbox went out to through the gateway's egress proxy, the only
way out of an agent sandbox: each host and port, allowed or refused, with
its connections, the bytes each way and when. A refusal says why; each is
in the audit log too (berth admin audit). An engineer sandbox goes out on
its own network, not through the proxy, and shows nothing here.

--as-policy prints the hosts the sandbox reached by name as a class's
egress: field, to commit into the class file (berth sandbox apply): what a
setup reached, frozen into the list its agents run under.`,
		Example: `  berth sandbox egress fix-123
  berth sandbox egress fix-123 --as-policy >> egress.yaml`,
		Args: exactArgs(1, "a sandbox name or id"),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := g.client()
			if err != nil {
				return err
			}
			e, err := c.SandboxEgress(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			if asPolicy {
				fmt.Fprint(g.env.Stdout, policyFragment(e))
				return nil
			}
			return render(g.env.Stdout, output, e, func(tw *tabwriter.Writer) {
				fmt.Fprintf(tw, "policy:\t%s\n", e.Policy)
				if len(e.Hosts) == 0 {
					fmt.Fprintf(tw, "connections:\tnone through the proxy\n")
					return
				}
				fmt.Fprintln(tw)
				fmt.Fprintln(tw, "HOST\tPORT\tDECISION\tCONNECTIONS\tSENT\tRECEIVED\tLAST\tWHY")
				for _, h := range e.Hosts {
					fmt.Fprintf(tw, "%s\t%d\t%s\t%d\t%s\t%s\t%s\t%s\n", h.Host, h.Port, h.Decision, h.Connections,
						byteSize(h.BytesUp), byteSize(h.BytesDown), until(g.env.Now(), h.Last), h.Why)
				}
			})
		},
	}
	outputFlag(cmd, &output)
	cmd.Flags().BoolVar(&asPolicy, "as-policy", false, "print the hosts it reached by name as a class's egress: field (YAML)")
	return cmd
}

// policyFragment is the hosts e's sandbox reached by name as a class's
// egress: field, in YAML (each quoted: a * begins an alias there).
func policyFragment(e api.SandboxEgress) string {
	var b strings.Builder
	fmt.Fprintf(&b, "# the hosts sandbox %s (%s) reached by name\n", e.Name, e.Sandbox)
	if len(e.Learned) == 1 && e.Learned[0] == "none" {
		b.WriteString("egress: none\n")
		return b.String()
	}
	b.WriteString("egress:\n")
	for _, h := range e.Learned {
		fmt.Fprintf(&b, "  - %s\n", strconv.Quote(h))
	}
	return b.String()
}

// byteSize words a count of bytes in binary units: 812 B, 4.2 KiB, 1.0 GiB.
func byteSize(n int64) string {
	if n < 1024 {
		return strconv.FormatInt(n, 10) + " B"
	}
	f, unit := float64(n), "B"
	for _, u := range []string{"KiB", "MiB", "GiB", "TiB"} {
		if f < 1024 {
			break
		}
		f, unit = f/1024, u
	}
	return fmt.Sprintf("%.1f %s", f, unit)
}
