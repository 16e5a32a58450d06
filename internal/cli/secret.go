package cli

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"berth.dev/berth/internal/secret"
)

// maxSecretInput bounds what `berth secret set` reads from stdin: the
// gateway's limit, and a little for a trailing newline.
const maxSecretInput = 16<<10 + 2

func newSecretCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "secret",
		Short: "A project's secrets, which its agents use but never hold",
		Long: `A project's secrets by placeholder. An agent sandbox of the project has, in
the variable of a secret's name, a placeholder, never the value; the
gateway's egress proxy puts the value where the placeholder stands in the
headers of requests to the secret's hosts (inside HTTP Basic credentials
too), and nowhere else. The sandbox's egress must allow those hosts. The
value is sealed at rest with the deployment's key, never shown again,
never logged. An organisation's administrators set and delete its
projects' secrets; a placeholder stops working when its sandbox ends or
its secret is deleted.`,
	}
	var org, project string
	var hosts []string
	set := &cobra.Command{
		Use:   "set NAME --host HOST [--host HOST…]",
		Short: "Store a secret, reading its value from standard input",
		Long: `Store a secret of the project (set again to replace it), reading its value
from standard input: typed without echo at a terminal, else the input up to
its end, one trailing newline dropped. NAME is the variable agent sandboxes
see (letters, digits and _); --host names a host it is for (a name or
*.domain, :PORT when not 443), at most 16.`,
		Example: `  berth secret set GITHUB_TOKEN --host api.github.com < token.txt
  pass show ci/npm | berth secret set NPM_TOKEN --host registry.npmjs.org --project web`,
		Args: exactArgs(1, "the secret's name"),
		RunE: g.inOrg(&org, nil, func(cmd *cobra.Command, args []string, o orgCall) error {
			if len(hosts) == 0 {
				return usageError{errors.New("--host: name at least one host the secret is for")}
			}
			value, err := readSecret(g, args[0])
			if err != nil {
				return err
			}
			x, err := o.c.SetSecret(cmd.Context(), o.org, projectOrDefault(project), args[0], value, hosts)
			if err != nil {
				return err
			}
			fmt.Fprintf(g.env.Stdout, "secret %s is set for %s\n", x.Name, strings.Join(x.Hosts, ", "))
			return nil
		}),
	}
	set.Flags().StringSliceVar(&hosts, "host", nil, "a host the secret is for (repeat, or separate with commas)")

	var output string
	list := &cobra.Command{
		Use:   "list",
		Short: "List a project's secrets: names and hosts, never values",
		Args:  noArgs,
		RunE: g.inOrg(&org, nil, func(cmd *cobra.Command, _ []string, o orgCall) error {
			xs, err := o.c.Secrets(cmd.Context(), o.org, projectOrDefault(project))
			if err != nil {
				return err
			}
			return render(g.env.Stdout, output, xs, func(tw *tabwriter.Writer) {
				fmt.Fprintln(tw, "NAME\tHOSTS\tSET")
				for _, x := range xs {
					fmt.Fprintf(tw, "%s\t%s\t%s\n", x.Name, strings.Join(x.Hosts, ", "), x.CreatedAt.Local().Format(time.RFC3339))
				}
			})
		}),
	}
	outputFlag(list, &output)

	del := &cobra.Command{
		Use:   "delete NAME",
		Short: "Delete a secret: its placeholders stop working",
		Args:  exactArgs(1, "the secret's name"),
		RunE: g.inOrg(&org, nil, func(cmd *cobra.Command, args []string, o orgCall) error {
			if err := o.c.DeleteSecret(cmd.Context(), o.org, projectOrDefault(project), args[0]); err != nil {
				return err
			}
			fmt.Fprintf(g.env.Stdout, "secret %s is deleted\n", args[0])
			return nil
		}),
	}
	for _, c := range []*cobra.Command{set, list, del} {
		c.Flags().StringVar(&project, "project", "", "the project (default: default)")
	}
	orgFlag(&org, set, list, del)
	cmd.AddCommand(set, list, del)
	return cmd
}

// projectOrDefault is the project named, or the organisation's first,
// default.
func projectOrDefault(p string) string {
	if p == "" {
		return "default"
	}
	return p
}

// readSecret reads a secret's value from standard input: without echo at
// a terminal, else to its end (one trailing newline dropped).
func readSecret(g *globals, name string) (secret.Secret, error) {
	if f, ok := g.env.Stdin.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
		fmt.Fprintf(g.env.Stderr, "value of %s (not echoed): ", name)
		b, err := term.ReadPassword(int(f.Fd()))
		fmt.Fprintln(g.env.Stderr)
		if err != nil {
			return secret.Secret{}, fmt.Errorf("read the value: %w", err)
		}
		return checkedSecret(string(b))
	}
	b, err := io.ReadAll(io.LimitReader(bufio.NewReader(g.env.Stdin), maxSecretInput+1))
	if err != nil {
		return secret.Secret{}, fmt.Errorf("read the value from standard input: %w", err)
	}
	if len(b) > maxSecretInput {
		return secret.Secret{}, usageError{fmt.Errorf("the value on standard input is over %d bytes", maxSecretInput-2)}
	}
	v := strings.TrimSuffix(strings.TrimSuffix(string(b), "\n"), "\r")
	return checkedSecret(v)
}

func checkedSecret(v string) (secret.Secret, error) {
	if v == "" {
		return secret.Secret{}, usageError{errors.New("no value on standard input: pipe it in, or type it at a terminal")}
	}
	return secret.New(v), nil
}
