package cli

import (
	"fmt"
	"strconv"

	"github.com/spf13/cobra"
)

func newSandboxPreviewCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "preview NAME PORT",
		Short: "Print a link that opens a sandbox's port in a browser",
		Long: `Ask the gateway for an HTTP preview of PORT of a running engineer sandbox
and print its URL: open it in a browser, once, within a minute. The
browser then holds a cookie of the preview's own for eight hours, and
reaches the app on PORT (WebSockets too) as long as you may get inside
the sandbox.

Each sandbox's port has a host name of its own under the deployment's
preview domain (BERTH_PREVIEW_DOMAIN), never the gateway's, so the app's
pages cannot use your berth session. Without a preview domain the
gateway says so; berth sandbox forward reaches a port without one.

Who may: the sandbox's owner and operators; an organisation's
administrator is refused (and the attempt is in the audit log); anybody
else does not find the sandbox. The key comes from $BERTH_API_KEY or the
login file, never from the command line.`,
		Example: `  berth sandbox preview dev 3000     # prints http://p3000-sbx-….preview.example.com/?berth_preview=…`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) != 2 {
				return usageError{fmt.Errorf("%s: want a sandbox name and a PORT (see %s --help)", cmd.CommandPath(), cmd.CommandPath())}
			}
			if p, err := strconv.Atoi(args[1]); err != nil || p < 1 || p > 65535 {
				return usageError{fmt.Errorf("%s: %q: PORT must be a port number (the gateway reaches 1024–65535)", cmd.CommandPath(), args[1])}
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			port, _ := strconv.Atoi(args[1]) // checked by Args
			c, err := g.client()
			if err != nil {
				return err
			}
			p, err := c.Preview(cmd.Context(), args[0], port)
			if err != nil {
				return err
			}
			_, err = fmt.Fprintln(cmd.OutOrStdout(), p.URL)
			return err
		},
	}
}
