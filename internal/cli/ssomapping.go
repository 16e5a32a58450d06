package cli

import (
	"errors"
	"fmt"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"berth.dev/berth/internal/api"
)

// newOrgSSOCmd is "berth org sso": an organisation's mapping of the
// identity provider's groups to its members and administrators.
func newOrgSSOCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "sso",
		Short: "Which identity-provider groups make an organisation's members and administrators",
		Long: `Which groups at the identity provider make people members or administrators
of an organisation when they sign in through it (berth login --sso, or the
panel). A person in none of an organisation's groups is not let in to it;
one whose groups give several organisations chooses one. Operators come
from the gateway's BERTH_OIDC_OPERATOR_GROUPS, never from an organisation's
mapping. Its administrators (and operators) read it; only operators set it.`,
	}
	var org, output string
	show := &cobra.Command{
		Use:   "show",
		Short: "Show an organisation's groups of members and of administrators",
		Args:  noArgs,
		RunE: g.inOrg(&org, nil, func(cmd *cobra.Command, _ []string, o orgCall) error {
			m, err := o.c.SSOMapping(cmd.Context(), o.org)
			if err != nil {
				return err
			}
			return render(g.env.Stdout, output, m, func(tw *tabwriter.Writer) { mappingTable(tw, m) })
		}),
	}
	outputFlag(show, &output)

	var members, administrators []string
	set := &cobra.Command{
		Use:   "set",
		Short: "Replace an organisation's groups of members and of administrators (operators)",
		Long: `Replace an organisation's mapping: both lists are written as given, and a
list left out is set empty (--members "" empties one explicitly). Give at
least one of --members and --administrators. A group is named as the
identity provider's groups claim names it; a name holding a comma is
quoted, as in --members '"cn=eng,ou=groups"'. Operators only.`,
		Example: `  berth org sso set --org acme --members eng,contractors --administrators eng-leads
  berth org sso set --org acme --members "" --administrators eng-leads    # administrators only
  berth org sso show --org acme`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			f := cmd.Flags()
			if !f.Changed("members") && !f.Changed("administrators") {
				return usageError{errors.New("org sso set: give --members, --administrators or both (a list left out is set empty)")}
			}
			return g.inOrg(&org, nil, func(cmd *cobra.Command, _ []string, o orgCall) error {
				m, err := o.c.SetSSOMapping(cmd.Context(), o.org, api.SSOMapping{Members: groups(members), Administrators: groups(administrators)})
				if err != nil {
					return err
				}
				return render(g.env.Stdout, output, m, func(tw *tabwriter.Writer) { mappingTable(tw, m) })
			})(cmd, args)
		},
	}
	set.Flags().StringSliceVar(&members, "members", nil, "comma-separated groups whose people are members (replaces the list)")
	set.Flags().StringSliceVar(&administrators, "administrators", nil, "comma-separated groups whose people are administrators (replaces the list)")
	outputFlag(set, &output)
	orgFlag(&org, show, set)
	cmd.AddCommand(show, set)
	return cmd
}

// groups is a flag's groups, without empty ones, never nil: the gateway
// is sent a list.
func groups(in []string) []string {
	out := []string{}
	for _, s := range in {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	return out
}

func mappingTable(tw *tabwriter.Writer, m api.SSOMapping) {
	list := func(gs []string) string {
		if len(gs) == 0 {
			return "(none)"
		}
		return strings.Join(gs, ", ")
	}
	fmt.Fprintf(tw, "members\t%s\n", list(m.Members))
	fmt.Fprintf(tw, "administrators\t%s\n", list(m.Administrators))
	if len(m.Members) == 0 && len(m.Administrators) == 0 {
		fmt.Fprintln(tw, "(no group is named: the identity provider makes nobody a member or administrator here)")
	}
}
