package cli

import (
	"context"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"berth.dev/berth/internal/client"
	"berth.dev/berth/internal/runner"
)

// completeNames makes shell completion (berth completion bash|zsh|fish)
// offer names from the gateway: sandboxes for a sandbox command's NAME,
// classes, projects and runners for --class, --project and --runner.
// Offline, or without a key, it offers nothing and says nothing.
func completeNames(root *cobra.Command, g *globals) {
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		for _, sub := range c.Commands() {
			walk(sub)
		}
		if c.Parent() != nil && c.Parent().Name() == "sandbox" {
			switch arg := argOf(c.Use); {
			case c.Name() == "delete-class":
				c.ValidArgsFunction = g.completeFirst(classNames)
			case c.Name() == "create":
				// a new name
			case arg == "NAME":
				c.ValidArgsFunction = g.completeFirst(sandboxNames)
			case arg == "[NAME...]":
				c.ValidArgsFunction = func(cmd *cobra.Command, _ []string, _ string) ([]string, cobra.ShellCompDirective) {
					return g.complete(cmd.Context(), sandboxNames)
				}
			}
		}
		for flag, names := range map[string]func(context.Context, *client.Client) ([]string, error){
			"class": classNames, "project": projectNames, "runner": runnerNames,
		} {
			if c.Flags().Lookup(flag) != nil {
				_ = c.RegisterFlagCompletionFunc(flag, func(cmd *cobra.Command, _ []string, _ string) ([]string, cobra.ShellCompDirective) {
					return g.complete(cmd.Context(), names)
				})
			}
		}
	}
	walk(root)
}

// argOf is the first argument a command's Use names: "NAME" of "show NAME".
func argOf(use string) string {
	f := strings.Fields(use)
	if len(f) < 2 {
		return ""
	}
	return f[1]
}

// completeFirst completes a command's first argument with names.
func (g *globals) completeFirst(names func(context.Context, *client.Client) ([]string, error)) cobra.CompletionFunc {
	return func(cmd *cobra.Command, args []string, _ string) ([]string, cobra.ShellCompDirective) {
		if len(args) > 0 {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		return g.complete(cmd.Context(), names)
	}
}

// complete asks the gateway for names, briefly; any failure offers none.
func (g *globals) complete(ctx context.Context, names func(context.Context, *client.Client) ([]string, error)) ([]string, cobra.ShellCompDirective) {
	c, err := g.client()
	if err != nil {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	out, err := names(ctx, c.WithWarnings(func(string) {}))
	if err != nil {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	return out, cobra.ShellCompDirectiveNoFileComp
}

func sandboxNames(ctx context.Context, c *client.Client) ([]string, error) {
	sbs, err := c.WithLimit(1000).Sandboxes(ctx, client.ListOptions{})
	var out []string
	for _, sb := range sbs {
		out = append(out, sb.Name)
	}
	return out, err
}

func classNames(ctx context.Context, c *client.Client) ([]string, error) {
	classes, err := c.Classes(ctx, "")
	var out []string
	for _, cl := range classes {
		out = append(out, cl.Name)
	}
	return out, err
}

func projectNames(ctx context.Context, c *client.Client) ([]string, error) {
	who, err := c.Whoami(ctx)
	if err != nil {
		return nil, err
	}
	projects, err := c.Projects(ctx, who.Organisation.ID)
	var out []string
	for _, p := range projects {
		out = append(out, p.Name)
	}
	return out, err
}

// runnerNames are the runners berth runs (not one that talks to its
// vendor itself), the classes' first.
func runnerNames(ctx context.Context, c *client.Client) ([]string, error) {
	var out []string
	if classes, err := c.Classes(ctx, ""); err == nil {
		for _, cl := range classes {
			if cl.Runner != "" && !slices.Contains(out, cl.Runner) {
				out = append(out, cl.Runner)
			}
		}
	}
	for _, n := range runner.Names() {
		r, _ := runner.Get(n)
		if _, direct := r.(runner.VendorDirect); !direct && !slices.Contains(out, n) {
			out = append(out, n)
		}
	}
	return out, nil
}
