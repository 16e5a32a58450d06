package cli

import (
	"fmt"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"berth.dev/berth/internal/forge"
	"berth.dev/berth/internal/forge/local"
	"berth.dev/berth/internal/server"
)

func newRepoCmd(env Env) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "repo",
		Short: "The local forge's repositories (on the gateway's host)",
		Long: `The local forge (BERTH_SANDBOX_GIT_FORGE=local) is a directory of bare
repositories on the gateway's host: BERTH_SANDBOX_GIT_URL, default
BERTH_DATA_DIR/repos. These commands work on that directory directly, with
the gateway's settings, like berth admin bootstrap: those the gateway at
--url, BERTH_URL or the login file recorded when it started on this machine
(berth serve keeps them in its data directory), under what the environment
sets. A sandbox names a local repository by its name: berth sandbox create
--repo acme/app.`,
	}
	localForge := func(cmd *cobra.Command) (*local.Forge, error) {
		cfg, err := hostConfig(cmd, env)
		if err != nil {
			return nil, fmt.Errorf("the gateway's settings are wrong:\n%w", err)
		}
		return server.LocalForge(cfg)
	}
	imp := &cobra.Command{
		Use:   "import NAME PATH",
		Short: "Make the repository NAME (such as acme/app) from the git repository at PATH",
		Long: `Make the bare repository NAME from the git repository at PATH (a working tree
or a bare repository): all its branches and tags. NAME is how sandboxes and
allowed_repos name it, such as acme/app.`,
		Args: exactArgs(2, "a name and a path"),
		RunE: func(cmd *cobra.Command, args []string) error {
			l, err := localForge(cmd)
			if err != nil {
				return err
			}
			if err := forge.CheckPath(args[0]); err != nil {
				return usageError{err}
			}
			dir, err := l.Import(cmd.Context(), args[0], args[1])
			if err != nil {
				return err
			}
			fmt.Fprintf(env.Stdout, "imported %s into %s\n", args[0], dir)
			return nil
		},
	}
	var output string
	list := &cobra.Command{
		Use:     "list",
		Aliases: []string{"ls"},
		Short:   "List the local forge's repositories",
		Args:    noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			l, err := localForge(cmd)
			if err != nil {
				return err
			}
			repos, err := l.List()
			if err != nil {
				return err
			}
			if repos == nil {
				repos = []local.Repo{}
			}
			return render(env.Stdout, output, repos, func(tw *tabwriter.Writer) {
				fmt.Fprintln(tw, "NAME\tDEFAULT BRANCH\tPATH")
				for _, r := range repos {
					fmt.Fprintf(tw, "%s\t%s\t%s\n", r.Name, orDash(r.DefaultBranch), r.Path)
				}
			})
		},
	}
	outputFlag(list, &output)
	path := &cobra.Command{
		Use:   "path NAME",
		Short: "Print the bare repository's path",
		Args:  exactArgs(1, "a repository name"),
		RunE: func(cmd *cobra.Command, args []string) error {
			l, err := localForge(cmd)
			if err != nil {
				return err
			}
			p, err := l.Path(forge.Repo{Path: args[0]})
			if err != nil {
				return err
			}
			fmt.Fprintln(env.Stdout, p)
			return nil
		},
	}
	cmd.AddCommand(imp, list, path)
	return cmd
}
