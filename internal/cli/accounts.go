package cli

import (
	"errors"
	"fmt"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"berth.dev/berth/internal/api"
	"berth.dev/berth/internal/openssh"
	"berth.dev/berth/internal/server"
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
			cfg, err := hostConfig(cmd, env)
			if err != nil {
				return fmt.Errorf("bootstrap: the gateway's settings are wrong:\n%w", err)
			}
			out, err := server.Bootstrap(cmd.Context(), cfg, org, project, user)
			if err != nil {
				return err
			}
			return render(env.Stdout, output, out, func(tw *tabwriter.Writer) {
				fmt.Fprintf(tw, "organisation\t%s\t%s\n", out.Organisation.Name, out.Organisation.ID)
				fmt.Fprintf(tw, "project\t%s\t%s\n", out.Project.Name, out.Project.ID)
				fmt.Fprintf(tw, "operator\t%s\t%s\n", out.User.Name, out.User.ID)
				fmt.Fprintf(tw, "key\t%s\t(shown once: keep it; berth login reads it from stdin)\n", out.Key.Secret)
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
	var limit int
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
			return render(g.env.Stdout, output, o, func(tw *tabwriter.Writer) {
				fmt.Fprintf(tw, "created organisation %s (%s)\n", o.Name, o.ID)
			})
		},
	}
	create.Flags().StringVar(&project, "project", "default", "the name of its first (default) project")
	outputFlag(create, &output)
	list := &cobra.Command{
		Use:     "list",
		Aliases: []string{"ls"},
		Short:   "List the organisations you may see, oldest first",
		Args:    noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := g.listClient(limit)
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
	limitFlag(list, &limit)
	cmd.AddCommand(create, list, newInferenceCmd(g, false), newOrgSSOCmd(g))
	return cmd
}

func newProjectCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{Use: "project", Short: "Projects of an organisation (the oldest is the default)"}
	var org, output string
	var limit int
	create := &cobra.Command{
		Use:   "create NAME",
		Short: "Create a project (administrators)",
		Args:  exactArgs(1, "the project's name"),
		RunE: g.inOrg(&org, nil, func(cmd *cobra.Command, args []string, o orgCall) error {
			p, err := o.c.CreateProject(cmd.Context(), o.org, args[0])
			if err != nil {
				return err
			}
			return render(g.env.Stdout, output, p, func(tw *tabwriter.Writer) {
				fmt.Fprintf(tw, "created project %s (%s)\n", p.Name, p.ID)
			})
		}),
	}
	list := &cobra.Command{
		Use:     "list",
		Aliases: []string{"ls"},
		Short:   "List an organisation's projects, oldest (the default) first",
		Args:    noArgs,
		RunE: g.inOrg(&org, &limit, func(cmd *cobra.Command, _ []string, o orgCall) error {
			prjs, err := o.c.Projects(cmd.Context(), o.org)
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
		}),
	}
	orgFlag(&org, create, list)
	outputFlag(list, &output)
	outputFlag(create, &output)
	limitFlag(list, &limit)
	cmd.AddCommand(create, list, newInferenceCmd(g, true))
	return cmd
}

func newUserCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{Use: "user", Short: "Users of an organisation"}
	var org, role, email, output, ttl string
	var withKey, invite bool
	var limit int
	create := &cobra.Command{
		Use:   "create NAME",
		Short: "Create a user (administrators; only operators make operators)",
		Long: `Create a user in an organisation. Roles: member (default), admin (administers
the organisation: classes, quotas, projects, users, every sandbox but no shell),
operator (the whole deployment; only operators make operators).

A person's key is theirs alone: only they or an operator mint it. With
--invite, a one-time invitation for the new user is printed once instead.
Give it to them by a channel only they read (it is a credential); they
exchange it for their own key with "berth login --invitation". It works
once, for 72h unless --ttl says otherwise (5m to 7d). If someone else uses
it first, the user's own login fails saying so, and the audit log shows
both uses. "berth user invite NAME" sends a fresh one until they have.

With --key (operators only), a key for the new user is minted and printed
once instead, for scripts and service accounts.`,
		Example: `  berth user create bob --invite
  berth user create carol --role admin --invite --ttl 24h
  berth user create ci-bot --key -o json        # operators`,
		Args: exactArgs(1, "the user's name"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if withKey && invite {
				return usageError{errors.New("user create: --key and --invite: choose one")}
			}
			c, url, err := g.clientAndURL()
			if err != nil {
				return err
			}
			if withKey || org == "" {
				who, err := c.Whoami(cmd.Context())
				if err != nil {
					return err
				}
				if withKey && who.User.Role != "operator" {
					return fmt.Errorf("user create: --key mints a key for someone else, which only an operator may: "+
						"a person's key is theirs alone. Send an invitation instead: berth user create %s --invite "+
						"(nothing was created)", args[0])
				}
				if org == "" {
					org = who.Organisation.ID
				}
			}
			u, err := c.CreateUser(cmd.Context(), org, api.CreateUser{Name: args[0], Email: email, Role: role})
			if err != nil {
				return err
			}
			out := createdUser{User: u}
			switch {
			case withKey:
				k, err := c.CreateKey(cmd.Context(), api.CreateKey{User: u.ID, Name: "first"})
				if err != nil {
					return err
				}
				out.Key = &k
			case invite:
				inv, err := c.Invite(cmd.Context(), org, u.ID, api.CreateInvitation{TTL: ttl})
				if err != nil {
					return fmt.Errorf("created %s %s (%s), but no invitation: %w", u.Role, u.Name, u.ID, err)
				}
				out.Invitation = &inv
			}
			return render(g.env.Stdout, output, out, func(tw *tabwriter.Writer) {
				fmt.Fprintf(tw, "created %s %s (%s)\n", u.Role, u.Name, u.ID)
				if out.Key != nil {
					fmt.Fprintf(tw, "key %s (shown once)\n", out.Key.Secret)
				}
				if out.Invitation != nil {
					printInvitation(tw, *out.Invitation, url)
				}
			})
		},
	}
	create.Flags().StringVar(&role, "role", "member", "member, admin or operator")
	create.Flags().StringVar(&email, "email", "", "the user's email, used as their git author")
	create.Flags().BoolVar(&invite, "invite", false, "print a one-time invitation the user exchanges for their own key (berth login --invitation)")
	create.Flags().BoolVar(&withKey, "key", false, "operators: mint a key for the user and print it once")
	outputFlag(create, &output)
	inviteCmd := &cobra.Command{
		Use:   "invite NAME",
		Short: "Print a fresh one-time invitation for a user, replacing any earlier unused one",
		Long: `Print a fresh one-time invitation for a user, which they exchange for their own
key with "berth login --invitation". It replaces any earlier invitation of
theirs that was not used, works once, and for 72h unless --ttl says
otherwise (5m to 7d).

An administrator may invite only a user who has never signed in (no key of
theirs has ever existed): after that, a user's keys are minted by them or by
an operator only. An operator may invite anyone: a recovery invitation, for
a user who lost every key.`,
		Example: `  berth user invite bob
  berth user invite bob --ttl 4h -o json`,
		Args: exactArgs(1, "a user's name or id"),
		RunE: g.inOrg(&org, nil, func(cmd *cobra.Command, args []string, o orgCall) error {
			inv, err := o.c.Invite(cmd.Context(), o.org, args[0], api.CreateInvitation{TTL: ttl})
			if err != nil {
				return err
			}
			return render(g.env.Stdout, output, inv, func(tw *tabwriter.Writer) { printInvitation(tw, inv, o.url) })
		}),
	}
	outputFlag(inviteCmd, &output)
	for _, c := range []*cobra.Command{create, inviteCmd} {
		c.Flags().StringVar(&ttl, "ttl", "", "how long the invitation may wait to be used, such as 24h or 3d (default 72h, at most 7d)")
	}
	list := &cobra.Command{
		Use:     "list",
		Aliases: []string{"ls"},
		Short:   "List an organisation's users, oldest first",
		Args:    noArgs,
		RunE: g.inOrg(&org, &limit, func(cmd *cobra.Command, _ []string, o orgCall) error {
			users, err := o.c.Users(cmd.Context(), o.org)
			if err != nil {
				return err
			}
			return render(g.env.Stdout, output, users, func(tw *tabwriter.Writer) {
				fmt.Fprintln(tw, "NAME\tROLE\tID")
				for _, u := range users {
					fmt.Fprintf(tw, "%s\t%s\t%s\n", u.Name, u.Role, u.ID)
				}
			})
		}),
	}
	toggle := func(verb, short string, disabled bool) *cobra.Command {
		return &cobra.Command{
			Use:   verb + " NAME",
			Short: short,
			Args:  exactArgs(1, "a user's name or id"),
			RunE: g.inOrg(&org, nil, func(cmd *cobra.Command, args []string, o orgCall) error {
				if !disabled {
					u, err := o.c.EnableUser(cmd.Context(), o.org, args[0])
					if err != nil {
						return err
					}
					return render(g.env.Stdout, output, u, func(tw *tabwriter.Writer) {
						fmt.Fprintf(tw, "enabled %s (%s)\n", u.Name, u.ID)
					})
				}
				res, err := o.c.DisableUser(cmd.Context(), o.org, args[0])
				if err != nil {
					return err
				}
				return render(g.env.Stdout, output, res, func(tw *tabwriter.Writer) {
					fmt.Fprintf(tw, "disabled %s (%s); %d of their sandboxes ended or expired\n", res.User.Name, res.User.ID, res.Sandboxes)
				})
			}),
		}
	}
	disable := toggle("disable", "Disable a user: their keys stop working, their sandboxes end or expire, repository credentials are revoked", true)
	enable := toggle("enable", "Let a disabled user back in (their sandboxes stay as they are)", false)
	orgFlag(&org, create, inviteCmd, list, disable, enable)
	outputFlag(list, &output)
	outputFlag(disable, &output)
	outputFlag(enable, &output)
	limitFlag(list, &limit)
	cmd.AddCommand(create, inviteCmd, list, disable, enable, newUserShowCmd(g), newUserSetProjectCmd(g))
	return cmd
}

// createdUser is what "berth user create -o json" prints: the user, and the
// key or the invitation made with them.
type createdUser struct {
	User       api.User        `json:"user"`
	Key        *api.NewKey     `json:"key,omitempty"`
	Invitation *api.Invitation `json:"invitation,omitempty"`
}

// revokedKey is what "berth key revoke -o json" prints.
type revokedKey struct {
	ID      string `json:"id"`
	Revoked bool   `json:"revoked"`
}

// printInvitation shows an invitation once, with what its user does with it.
func printInvitation(tw *tabwriter.Writer, inv api.Invitation, url string) {
	kind := "invitation"
	if inv.Recovery {
		kind = "recovery invitation"
	}
	fmt.Fprintf(tw, "%s %s (shown once; single use; expires %s)\n", kind, inv.Secret, inv.ExpiresAt.UTC().Format("2006-01-02 15:04 MST"))
	fmt.Fprintf(tw, "%s signs in with it: berth login --invitation --url %s (it reads the invitation from standard input)\n", inv.User.Name, url)
}

func newKeyCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{Use: "key", Short: "API keys (stored hashed; a secret is shown once)"}
	var user, name, output string
	var limit int
	create := &cobra.Command{
		Use:   "create",
		Short: "Mint a key for yourself (operators: also for anyone, with --user)",
		Long: `Mint a key for yourself and print its secret once. A person's key is theirs
alone: only they or an operator mint one. An administrator lists and revokes
the keys of their organisation's members and administrators, but lets a new
user in with an invitation (berth user create NAME --invite), never a key.`,
		Args: noArgs,
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
		Short:   "List keys, oldest first, without their secrets",
		Args:    noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := g.listClient(limit)
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
	limitFlag(list, &limit)
	create.Flags().StringVar(&user, "user", "", "operators: the user name or id to mint it for (default you)")
	list.Flags().StringVar(&user, "user", "", "user name or id (default you; administrators: a user of your organisation)")
	revoke := &cobra.Command{
		Use:   "revoke ID",
		Short: "Revoke a key at once (yours; administrators: also of your organisation's users)",
		Args:  exactArgs(1, "the key's id"),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := g.client()
			if err != nil {
				return err
			}
			if err := c.RevokeKey(cmd.Context(), args[0]); err != nil {
				return err
			}
			return render(g.env.Stdout, output, revokedKey{ID: args[0], Revoked: true}, func(tw *tabwriter.Writer) {
				fmt.Fprintf(tw, "revoked %s\n", args[0])
			})
		},
	}
	outputFlag(revoke, &output)
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
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := hostConfig(cmd, env)
			if err != nil {
				return fmt.Errorf("podman-env: the gateway's settings are wrong:\n%w", err)
			}
			penv, err := server.PodmanEnv(cfg)
			if err != nil {
				return err
			}
			for _, kv := range penv {
				if k, v, _ := strings.Cut(kv, "="); strings.HasPrefix(k, "CONTAINERS_") {
					fmt.Fprintf(env.Stdout, "export %s=%s\n", k, openssh.ShellQuote(v))
				}
			}
			return nil
		},
	}
}
