package inference

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"berth.dev/berth/internal/fault"
)

// Settings are an organisation's or a project's inference rules (SPEC
// S14). The organisation's and a project's combine restrict-only, like
// guardrails (SPEC S7): a model must be on both lists, both budgets and
// both rate limits hold, and both system prompts are sent, the
// organisation's first.
type Settings struct {
	// Models is the allow-list. nil means not set: no narrowing (every
	// model the deployment serves, on an organisation); an empty list
	// allows none.
	Models []string
	// BudgetUSD caps the inference spend of a calendar month (UTC); nil is
	// no budget. On an organisation it caps all its projects together.
	BudgetUSD *float64
	// Rate caps requests; nil is no limit. On an organisation it counts
	// all its projects together.
	Rate *Rate
	// SystemPrompt is prepended to every request's own system prompt; ""
	// adds none.
	SystemPrompt string
}

// maxSystemPrompt caps a system prompt.
const maxSystemPrompt = 64 << 10

// Validate checks the settings against the deployment's models, reporting
// every problem at once.
func (s Settings) Validate(c *Catalog) error {
	var bad []string
	for _, m := range s.Models {
		if _, ok := c.Model(m); !ok {
			var served []string
			for _, sm := range c.Models() {
				served = append(served, sm.ID)
			}
			bad = append(bad, fmt.Sprintf("models: %q is not served by this gateway (it serves: %s)", m, names(served)))
		}
	}
	if b := s.BudgetUSD; b != nil && (*b < 0 || math.IsNaN(*b) || math.IsInf(*b, 0)) {
		bad = append(bad, fmt.Sprintf("budget: %v is not an amount of US dollars", *b))
	}
	if r := s.Rate; r != nil && (r.Requests <= 0 || r.Per <= 0) {
		bad = append(bad, fmt.Sprintf("rate: %s allows nothing", r))
	}
	if len(s.SystemPrompt) > maxSystemPrompt {
		bad = append(bad, fmt.Sprintf("system prompt: %d bytes; at most %d", len(s.SystemPrompt), maxSystemPrompt))
	}
	if len(bad) > 0 {
		return fault.Errorf(fault.Invalid, "%s", strings.Join(bad, "; "))
	}
	return nil
}

// Rate is a number of requests per period.
type Rate struct {
	Requests int
	Per      time.Duration
}

// ParseRate reads "60/m", "10/s", "1000/h", "5000/d" or "100/10m".
func ParseRate(s string) (Rate, error) {
	n, per, ok := strings.Cut(strings.TrimSpace(s), "/")
	if !ok {
		return Rate{}, fault.Errorf(fault.Invalid, "rate %q: want requests/period, such as 60/m", s)
	}
	req, err := strconv.Atoi(n)
	if err != nil || req <= 0 {
		return Rate{}, fault.Errorf(fault.Invalid, "rate %q: %q is not a positive whole number", s, n)
	}
	var d time.Duration
	switch per {
	case "s":
		d = time.Second
	case "m":
		d = time.Minute
	case "h":
		d = time.Hour
	case "d":
		d = 24 * time.Hour
	default:
		if d, err = time.ParseDuration(per); err != nil || d < time.Second {
			return Rate{}, fault.Errorf(fault.Invalid, "rate %q: the period is s, m, h, d or a duration of at least 1s", s)
		}
	}
	return Rate{Requests: req, Per: d}, nil
}

// String writes the rate as ParseRate reads it.
func (r Rate) String() string {
	per := ""
	switch r.Per {
	case time.Second:
		per = "s"
	case time.Minute:
		per = "m"
	case time.Hour:
		per = "h"
	case 24 * time.Hour:
		per = "d"
	default:
		per = strings.TrimSuffix(r.Per.String(), "0s") // 10m0s → 10m
		if strings.HasSuffix(per, "h0m") {
			per = strings.TrimSuffix(per, "0m")
		}
	}
	return fmt.Sprintf("%d/%s", r.Requests, per)
}

// Policy is what holds for one key: its organisation's and its project's
// settings together.
type Policy struct {
	Org, Project     string // ids
	ProjectName      string // for messages
	OrgRules, Rules  Settings
	catalog          *Catalog
	allowOrg, allowP map[string]bool // nil: not set
}

func newPolicy(c *Catalog, org, project, projectName string, og, pg Settings) Policy {
	set := func(list []string) map[string]bool {
		if list == nil {
			return nil
		}
		m := make(map[string]bool, len(list))
		for _, x := range list {
			m[x] = true
		}
		return m
	}
	return Policy{Org: org, Project: project, ProjectName: projectName, OrgRules: og, Rules: pg, catalog: c,
		allowOrg: set(og.Models), allowP: set(pg.Models)}
}

// Allows reports whether both allow-lists let model through.
func (p Policy) Allows(model string) bool {
	return (p.allowOrg == nil || p.allowOrg[model]) && (p.allowP == nil || p.allowP[model])
}

// Reachable lists the models the key may reach, chat models first and
// routers after them (SPEC S14), each group in the deployment's order.
func (p Policy) Reachable() []Model {
	all := p.catalog.reachable(p.Allows)
	var chat, routers []Model
	for _, m := range all {
		if m.Router() {
			routers = append(routers, m)
		} else {
			chat = append(chat, m)
		}
	}
	return append(chat, routers...)
}

// reachableIDs names what Reachable lists.
func (p Policy) reachableIDs() []string {
	var out []string
	for _, m := range p.Reachable() {
		out = append(out, m.ID)
	}
	return out
}

// SystemPrompt is what every request of the key carries: the
// organisation's prompt, then the project's.
func (p Policy) SystemPrompt() string {
	parts := slices.DeleteFunc([]string{p.OrgRules.SystemPrompt, p.Rules.SystemPrompt}, func(s string) bool {
		return strings.TrimSpace(s) == ""
	})
	return strings.Join(parts, "\n\n")
}

// limits are the budgets that hold, the organisation's first.
func (p Policy) limits() []limit {
	var out []limit
	if b := p.OrgRules.BudgetUSD; b != nil {
		out = append(out, limit{scope: scopeKey(p.Org, ""), name: "the organisation", org: p.Org, budget: *b})
	}
	if b := p.Rules.BudgetUSD; b != nil {
		out = append(out, limit{scope: scopeKey(p.Org, p.Project), name: "project " + p.ProjectName, org: p.Org, project: p.Project, budget: *b})
	}
	return out
}

// scopeKey names an organisation ("org") or one of its projects
// ("org/project") for the ledger and the rate limiter.
func scopeKey(org, project string) string {
	if project == "" {
		return org
	}
	return org + "/" + project
}
