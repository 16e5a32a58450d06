package cli

import (
	"context"
	"fmt"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"berth.dev/berth/internal/api"
	"berth.dev/berth/internal/client"
)

// shownUser is what "berth user show -o json" prints: the user and the
// project their new sandboxes and keys land in.
type shownUser struct {
	User    api.User    `json:"user"`
	Project api.Project `json:"project"`
}

func newUserShowCmd(g *globals) *cobra.Command {
	var org, output string
	cmd := &cobra.Command{
		Use:   "show NAME",
		Short: "Show a user, with the project their new sandboxes and keys land in",
		Args:  exactArgs(1, "a user's name or id"),
		RunE: g.inOrg(&org, nil, func(cmd *cobra.Command, args []string, o orgCall) error {
			users, err := o.c.Users(cmd.Context(), o.org)
			if err != nil {
				return err
			}
			for _, u := range users {
				if u.ID != args[0] && u.Name != args[0] {
					continue
				}
				prj, def, err := homeProject(cmd.Context(), o.c, o.org, u)
				if err != nil {
					return err
				}
				return render(g.env.Stdout, output, shownUser{User: u, Project: prj}, func(tw *tabwriter.Writer) {
					row := func(k, v string) {
						if v != "" {
							fmt.Fprintf(tw, "%s:\t%s\n", k, v)
						}
					}
					row("name", u.Name)
					row("id", u.ID)
					row("role", u.Role)
					row("email", u.Email)
					if u.Disabled {
						row("disabled", "yes (their keys do not work)")
					}
					how := "set by an administrator"
					if def {
						how = "the organisation's oldest"
					}
					row("project", fmt.Sprintf("%s (%s; %s)", prj.Name, prj.ID, how))
					row("created", u.CreatedAt.Local().Format("2006-01-02 15:04"))
				})
			}
			return fmt.Errorf("no user %q in this organisation (berth user list names them)", args[0])
		}),
	}
	orgFlag(&org, cmd)
	outputFlag(cmd, &output)
	return cmd
}

// homeProject is the project u's new sandboxes land in, and whether it is
// the organisation's oldest because none was set.
func homeProject(ctx context.Context, c *client.Client, org string, u api.User) (api.Project, bool, error) {
	projects, err := c.Projects(ctx, org)
	if err != nil {
		return api.Project{}, false, err
	}
	for _, p := range projects {
		if u.Project != "" && p.ID == u.Project {
			return p, false, nil
		}
	}
	if len(projects) == 0 {
		return api.Project{}, false, fmt.Errorf("organisation %s has no project", org)
	}
	return projects[0], true, nil // oldest first
}

func newUserSetProjectCmd(g *globals) *cobra.Command {
	var org, output string
	cmd := &cobra.Command{
		Use:   "set-project NAME PROJECT",
		Short: "Set the project a user's new sandboxes and keys land in (administrators)",
		Long: `Set the project a user's new sandboxes and keys (their model use) land in.
A member never chooses a project: without this, theirs is the
organisation's oldest. Sandboxes made before stay where they are.
berth user show NAME shows it.`,
		Example: `  berth project create ml
  berth user set-project bob ml`,
		Args: exactArgs(2, "a user's name or id and a project's name or id"),
		RunE: g.inOrg(&org, nil, func(cmd *cobra.Command, args []string, o orgCall) error {
			u, err := o.c.SetUserProject(cmd.Context(), o.org, args[0], args[1])
			if err != nil {
				return err
			}
			return render(g.env.Stdout, output, u, func(tw *tabwriter.Writer) {
				fmt.Fprintf(tw, "%s's new sandboxes and keys land in project %s\n", u.Name, args[1])
			})
		}),
	}
	orgFlag(&org, cmd)
	outputFlag(cmd, &output)
	return cmd
}
