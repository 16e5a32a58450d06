package cli

import (
	"fmt"
	"log/slog"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"berth.dev/berth/internal/api"
)

func newAdminCmd(env Env) *cobra.Command {
	admin := &cobra.Command{
		Use:   "admin",
		Short: "Work on the gateway's database directly (on the gateway's host)",
	}
	var org, project, user, output string
	boot := &cobra.Command{
		Use:   "bootstrap",
		Short: "Create the first organisation, project and operator, and print the operator's key",
		Long: `Create the first organisation, project and operator on an empty deployment,
and print the operator's key. The key is shown this once: keep it.

It opens the database the gateway uses (BERTH_DATA_DIR or BERTH_DATABASE_URL)
and refuses when any organisation exists.`,
		Example: `  berth admin bootstrap
  berth admin bootstrap --org acme --user ops@acme.example -o json | jq -r .key.secret | berth login`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := LoadConfig(env.Getenv)
			if err != nil {
				return fmt.Errorf("bootstrap: the gateway's settings are wrong:\n%w", err)
			}
			a, err := build(cmd.Context(), cfg, slog.New(slog.DiscardHandler))
			if err != nil {
				return err
			}
			defer a.store.Close()
			o, p, u, k, err := a.accounts.Bootstrap(cmd.Context(), org, project, user)
			if err != nil {
				return err
			}
			out := api.Bootstrap{
				Organisation: api.Organisation{ID: o.ID, Name: o.Name, CreatedAt: o.CreatedAt},
				Project:      api.Project{ID: p.ID, Organisation: p.Org, Name: p.Name, Default: true, CreatedAt: p.CreatedAt},
				User:         api.User{ID: u.ID, Organisation: u.Org, Name: u.Name, Role: string(u.Role), CreatedAt: u.CreatedAt},
				Key:          api.NewKey{Key: api.Key{ID: k.Key.ID, User: u.ID, Name: k.Key.Name, CreatedAt: k.Key.CreatedAt}, Secret: k.Secret.Reveal()},
			}
			return render(env.Stdout, output, out, func(tw *tabwriter.Writer) {
				fmt.Fprintf(tw, "organisation\t%s\t%s\n", o.Name, o.ID)
				fmt.Fprintf(tw, "project\t%s\t%s\n", p.Name, p.ID)
				fmt.Fprintf(tw, "operator\t%s\t%s\n", u.Name, u.ID)
				fmt.Fprintf(tw, "key\t%s\t(shown once: keep it; berth login reads it from stdin)\n", k.Secret.Reveal())
			})
		},
	}
	boot.Flags().StringVar(&org, "org", "main", "the first organisation's name")
	boot.Flags().StringVar(&project, "project", "default", "its first (default) project's name")
	boot.Flags().StringVar(&user, "user", "operator", "the operator's name")
	outputFlag(boot, &output)
	admin.AddCommand(boot, newPodmanEnvCmd(env), newAgentNetworkCmd(env))
	return admin
}

func newWhoamiCmd(g *globals) *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:   "whoami",
		Short: "Show who the key belongs to",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := g.client()
			if err != nil {
				return err
			}
			w, err := c.Whoami(cmd.Context())
			if err != nil {
				return err
			}
			return render(g.env.Stdout, output, w, func(tw *tabwriter.Writer) {
				fmt.Fprintf(tw, "user\t%s\t%s\n", w.User.Name, w.User.ID)
				fmt.Fprintf(tw, "role\t%s\n", w.User.Role)
				fmt.Fprintf(tw, "organisation\t%s\t%s\n", w.Organisation.Name, w.Organisation.ID)
				fmt.Fprintf(tw, "key\t%s\n", w.KeyID)
			})
		},
	}
	outputFlag(cmd, &output)
	return cmd
}

func newOrgCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{Use: "org", Short: "Organisations (operators create them)"}
	var project, output string
	create := &cobra.Command{
		Use:   "create NAME",
		Short: "Create an organisation with its default project (operators)",
		Args:  exactArgs(1, "the organisation's name"),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := g.client()
			if err != nil {
				return err
			}
			o, err := c.CreateOrg(cmd.Context(), api.CreateOrganisation{Name: args[0], Project: project})
			if err != nil {
				return err
			}
			fmt.Fprintf(g.env.Stdout, "created organisation %s (%s)\n", o.Name, o.ID)
			return nil
		},
	}
	create.Flags().StringVar(&project, "project", "default", "the name of its first (default) project")
	list := &cobra.Command{
		Use:     "list",
		Aliases: []string{"ls"},
		Short:   "List the organisations you may see",
		Args:    noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := g.client()
			if err != nil {
				return err
			}
			orgs, err := c.Orgs(cmd.Context())
			if err != nil {
				return err
			}
			return render(g.env.Stdout, output, orgs, func(tw *tabwriter.Writer) {
				fmt.Fprintln(tw, "NAME\tID\tCREATED")
				for _, o := range orgs {
					fmt.Fprintf(tw, "%s\t%s\t%s\n", o.Name, o.ID, o.CreatedAt.Format("2006-01-02"))
				}
			})
		},
	}
	outputFlag(list, &output)
	cmd.AddCommand(create, list, newInferenceCmd(g, false))
	return cmd
}

func newProjectCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{Use: "project", Short: "Projects of an organisation (the oldest is the default)"}
	var org, output string
	create := &cobra.Command{
		Use:   "create NAME",
		Short: "Create a project (administrators)",
		Args:  exactArgs(1, "the project's name"),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := g.client()
			if err != nil {
				return err
			}
			org, err := g.orgOrMine(cmd, c, org)
			if err != nil {
				return err
			}
			p, err := c.CreateProject(cmd.Context(), org, args[0])
			if err != nil {
				return err
			}
			fmt.Fprintf(g.env.Stdout, "created project %s (%s)\n", p.Name, p.ID)
			return nil
		},
	}
	list := &cobra.Command{
		Use:     "list",
		Aliases: []string{"ls"},
		Short:   "List an organisation's projects, the default first",
		Args:    noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := g.client()
			if err != nil {
				return err
			}
			org, err := g.orgOrMine(cmd, c, org)
			if err != nil {
				return err
			}
			prjs, err := c.Projects(cmd.Context(), org)
			if err != nil {
				return err
			}
			return render(g.env.Stdout, output, prjs, func(tw *tabwriter.Writer) {
				fmt.Fprintln(tw, "NAME\tID\tDEFAULT")
				for _, p := range prjs {
					def := ""
					if p.Default {
						def = "yes"
					}
					fmt.Fprintf(tw, "%s\t%s\t%s\n", p.Name, p.ID, def)
				}
			})
		},
	}
	for _, c := range []*cobra.Command{create, list} {
		c.Flags().StringVar(&org, "org", "", "organisation name or id (default yours)")
	}
	outputFlag(list, &output)
	cmd.AddCommand(create, list, newInferenceCmd(g, true))
	return cmd
}

func newUserCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{Use: "user", Short: "Users of an organisation"}
	var org, role, email, output string
	var withKey bool
	create := &cobra.Command{
		Use:   "create NAME",
		Short: "Create a user (administrators; only operators make operators)",
		Long: `Create a user in an organisation. Roles: member (default), admin (administers
the organisation: classes, quotas, projects, users, every sandbox but no shell),
operator (the whole deployment; only operators make operators).

With --key, a key for the new user is minted too and printed once.`,
		Args: exactArgs(1, "the user's name"),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := g.client()
			if err != nil {
				return err
			}
			org, err := g.orgOrMine(cmd, c, org)
			if err != nil {
				return err
			}
			u, err := c.CreateUser(cmd.Context(), org, api.CreateUser{Name: args[0], Email: email, Role: role})
			if err != nil {
				return err
			}
			fmt.Fprintf(g.env.Stdout, "created %s %s (%s)\n", u.Role, u.Name, u.ID)
			if withKey {
				k, err := c.CreateKey(cmd.Context(), api.CreateKey{User: u.ID, Name: "first"})
				if err != nil {
					return err
				}
				fmt.Fprintf(g.env.Stdout, "key %s (shown once)\n", k.Secret)
			}
			return nil
		},
	}
	create.Flags().StringVar(&role, "role", "member", "member, admin or operator")
	create.Flags().StringVar(&email, "email", "", "the user's email, used as their git author")
	create.Flags().BoolVar(&withKey, "key", false, "also mint a key for the user and print it once")
	list := &cobra.Command{
		Use:     "list",
		Aliases: []string{"ls"},
		Short:   "List an organisation's users",
		Args:    noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := g.client()
			if err != nil {
				return err
			}
			org, err := g.orgOrMine(cmd, c, org)
			if err != nil {
				return err
			}
			users, err := c.Users(cmd.Context(), org)
			if err != nil {
				return err
			}
			return render(g.env.Stdout, output, users, func(tw *tabwriter.Writer) {
				fmt.Fprintln(tw, "NAME\tROLE\tID")
				for _, u := range users {
					fmt.Fprintf(tw, "%s\t%s\t%s\n", u.Name, u.Role, u.ID)
				}
			})
		},
	}
	toggle := func(verb, short string, disabled bool) *cobra.Command {
		return &cobra.Command{
			Use:   verb + " NAME",
			Short: short,
			Args:  exactArgs(1, "a user's name or id"),
			RunE: func(cmd *cobra.Command, args []string) error {
				c, err := g.client()
				if err != nil {
					return err
				}
				org, err := g.orgOrMine(cmd, c, org)
				if err != nil {
					return err
				}
				if !disabled {
					u, err := c.EnableUser(cmd.Context(), org, args[0])
					if err != nil {
						return err
					}
					fmt.Fprintf(g.env.Stdout, "enabled %s (%s)\n", u.Name, u.ID)
					return nil
				}
				res, err := c.DisableUser(cmd.Context(), org, args[0])
				if err != nil {
					return err
				}
				fmt.Fprintf(g.env.Stdout, "disabled %s (%s); %d of their sandboxes ended or expired\n", res.User.Name, res.User.ID, res.Sandboxes)
				return nil
			},
		}
	}
	disable := toggle("disable", "Disable a user: their keys stop working, their sandboxes end or expire, repository credentials are revoked", true)
	enable := toggle("enable", "Let a disabled user back in (their sandboxes stay as they are)", false)
	for _, c := range []*cobra.Command{create, list, disable, enable} {
		c.Flags().StringVar(&org, "org", "", "organisation name or id (default yours)")
	}
	outputFlag(list, &output)
	cmd.AddCommand(create, list, disable, enable)
	return cmd
}

func newKeyCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{Use: "key", Short: "API keys (stored hashed; a secret is shown once)"}
	var user, name, output string
	create := &cobra.Command{
		Use:   "create",
		Short: "Mint a key for yourself, or (administrators) for a user of your organisation",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := g.client()
			if err != nil {
				return err
			}
			k, err := c.CreateKey(cmd.Context(), api.CreateKey{User: user, Name: name})
			if err != nil {
				return err
			}
			return render(g.env.Stdout, output, k, func(tw *tabwriter.Writer) {
				fmt.Fprintf(tw, "id\t%s\n", k.ID)
				fmt.Fprintf(tw, "key\t%s\t(shown once)\n", k.Secret)
			})
		},
	}
	create.Flags().StringVar(&name, "name", "", "a name to remember it by")
	outputFlag(create, &output)
	list := &cobra.Command{
		Use:     "list",
		Aliases: []string{"ls"},
		Short:   "List keys, without their secrets",
		Args:    noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := g.client()
			if err != nil {
				return err
			}
			keys, err := c.Keys(cmd.Context(), user)
			if err != nil {
				return err
			}
			return render(g.env.Stdout, output, keys, func(tw *tabwriter.Writer) {
				fmt.Fprintln(tw, "ID\tNAME\tSANDBOX\tCREATED\tSTATUS")
				for _, k := range keys {
					status := "live"
					if k.RevokedAt != nil {
						status = "revoked"
					} else if k.ExpiresAt != nil && k.ExpiresAt.Before(g.env.Now()) {
						status = "expired"
					}
					fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", k.ID, orDash(k.Name), orDash(k.Sandbox), k.CreatedAt.Format("2006-01-02 15:04"), status)
				}
			})
		},
	}
	outputFlag(list, &output)
	for _, c := range []*cobra.Command{create, list} {
		c.Flags().StringVar(&user, "user", "", "user name or id (default you)")
	}
	revoke := &cobra.Command{
		Use:   "revoke ID",
		Short: "Revoke a key at once",
		Args:  exactArgs(1, "the key's id"),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := g.client()
			if err != nil {
				return err
			}
			if err := c.RevokeKey(cmd.Context(), args[0]); err != nil {
				return err
			}
			fmt.Fprintf(g.env.Stdout, "revoked %s\n", args[0])
			return nil
		},
	}
	cmd.AddCommand(create, list, revoke)
	return cmd
}

func newPodmanEnvCmd(env Env) *cobra.Command {
	return &cobra.Command{
		Use:   "podman-env",
		Short: "Print the environment that points podman at the gateway's own store",
		Long: `Print shell exports that point podman at the podman driver's own
containers.conf and store (under BERTH_DATA_DIR), writing them first. Build
sandbox images into that store, or look at the gateway's containers, with:

  eval "$(berth admin podman-env)"
  podman ps --all`,
		Args: cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			cfg, err := LoadConfig(env.Getenv)
			if err != nil {
				return fmt.Errorf("podman-env: the gateway's settings are wrong:\n%w", err)
			}
			pc := podmanConfig(cfg)
			if err := pc.WriteConfig(); err != nil {
				return err
			}
			for _, kv := range pc.Env() {
				if k, v, _ := strings.Cut(kv, "="); strings.HasPrefix(k, "CONTAINERS_") {
					fmt.Fprintf(env.Stdout, "export %s=%s\n", k, shellQuote(v))
				}
			}
			return nil
		},
	}
}
