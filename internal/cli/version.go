package cli

import (
	"context"
	"fmt"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"berth.dev/berth/internal/server"
)

// versions is what "berth version -o json" prints.
type versions struct {
	Client  buildVersion  `json:"client"`
	Gateway *buildVersion `json:"gateway,omitempty"` // absent when it did not answer
	URL     string        `json:"url"`
	Error   string        `json:"error,omitempty"` // why the gateway's is absent
}

type buildVersion struct {
	Version string `json:"version"`
	Commit  string `json:"commit,omitempty"`
	Driver  string `json:"driver,omitempty"`
}

// clientVersion words berth's own version: "0.1.0-dev (commit 4e36fc7)".
func clientVersion() string {
	return worded(buildVersion{Version: server.Version, Commit: server.Commit()})
}

func worded(v buildVersion) string {
	s := v.Version
	if v.Commit != "" {
		s += " (commit " + shortRevision(v.Commit) + ")"
	}
	return s
}

// shortRevision is a build's commit as git shows it (12 hex digits),
// keeping a "+modified".
func shortRevision(c string) string {
	rev, modified := strings.CutSuffix(c, "+modified")
	rev = rev[:min(len(rev), 12)]
	if modified {
		rev += "+modified"
	}
	return rev
}

func newVersionCmd(g *globals) *cobra.Command {
	var output string
	var clientOnly bool
	cmd := &cobra.Command{
		Use:   "version",
		Short: "Print berth's version and commit, and the gateway's when it answers",
		Long: `Print the version and commit of this berth and, unless --client, of the
gateway it talks to (GET /healthz, which needs no key). A gateway that does
not answer is said so on standard error; the command still succeeds.`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			out := versions{Client: buildVersion{Version: server.Version, Commit: server.Commit()}}
			if !clientOnly {
				c, url, err := g.clientAndURL()
				if err != nil {
					return err
				}
				out.URL = url
				ctx, cancel := context.WithTimeout(cmd.Context(), 5*time.Second)
				defer cancel()
				if h, err := c.Health(ctx); err != nil {
					out.Error = describe(err)
				} else {
					out.Gateway = &buildVersion{Version: h.Version, Commit: h.Commit, Driver: h.Driver}
				}
			}
			if err := render(g.env.Stdout, output, out, func(tw *tabwriter.Writer) {
				fmt.Fprintf(tw, "client:\tberth %s\n", worded(out.Client))
				if out.Gateway != nil {
					driver := out.Gateway.Driver
					if driver == "" {
						driver = "none"
					}
					fmt.Fprintf(tw, "gateway:\tberth %s at %s (driver %s)\n", worded(*out.Gateway), out.URL, driver)
				}
			}); err != nil {
				return err
			}
			if out.Error != "" && output != "json" {
				// describe's words: the address, what the network said, and
				// what to check.
				fmt.Fprintf(g.env.Stderr, "gateway: %s\n", out.Error)
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&clientOnly, "client", false, "this berth's version only; ask no gateway")
	outputFlag(cmd, &output)
	return cmd
}
