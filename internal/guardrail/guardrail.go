// Package guardrail holds the sandbox quota fields of SPEC S7, how an
// organisation's and a project's guardrails combine (restrict-only: the
// minimum of each ceiling, the intersection of the repository lists), and
// the admission checks made against them. It is pure: the store makes the
// checks race-free by running them inside the transaction that admits.
package guardrail

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"berth.dev/berth/internal/egress"
	"berth.dev/berth/internal/fault"
	"berth.dev/berth/internal/quantity"
)

// Guardrail is the set of sandbox quota fields on an organisation or a
// project. A nil ceiling sets no limit. AllowedRepos nil means "not set":
// on an organisation that allows no repository, on a project it narrows
// nothing.
type Guardrail struct {
	MaxSandboxes     *int
	MaxSandboxMemory *int64 // MiB
	MaxSandboxCPU    *quantity.Millicores
	MaxSandboxTTL    *time.Duration
	AllowedRepos     []string
	// Egress narrows its agent sandboxes' egress (package egress) as
	// written: ["none"], ["open"] or hosts; nil narrows nothing.
	Egress []string
}

// EgressPolicy is the guardrail's egress; ok is false when it sets none.
func (g Guardrail) EgressPolicy() (p egress.Policy, ok bool, err error) {
	if g.Egress == nil {
		return egress.Policy{}, false, nil
	}
	p, err = egress.ParseWords(g.Egress)
	return p, err == nil, err
}

// NarrowEgress is p as the guardrail lets it be: restrict-only.
func (g Guardrail) NarrowEgress(p egress.Policy) egress.Policy {
	if own, ok, _ := g.EgressPolicy(); ok {
		return p.Narrow(own)
	}
	return p
}

// Validate reports every field out of range.
func (g Guardrail) Validate() error {
	var errs []error
	if g.MaxSandboxes != nil && *g.MaxSandboxes < 0 {
		errs = append(errs, fmt.Errorf("max_sandboxes: %d is negative", *g.MaxSandboxes))
	}
	if g.MaxSandboxMemory != nil && *g.MaxSandboxMemory <= 0 {
		errs = append(errs, fmt.Errorf("max_sandbox_memory: %s must be more than 0", quantity.FormatMiB(*g.MaxSandboxMemory)))
	}
	if g.MaxSandboxCPU != nil && *g.MaxSandboxCPU <= 0 {
		errs = append(errs, fmt.Errorf("max_sandbox_cpu: %s must be more than 0", *g.MaxSandboxCPU))
	}
	if g.MaxSandboxTTL != nil && *g.MaxSandboxTTL < 5*time.Minute {
		errs = append(errs, fmt.Errorf("max_sandbox_ttl: %s is under the 5m minimum", quantity.FormatDuration(*g.MaxSandboxTTL)))
	}
	for _, r := range g.AllowedRepos {
		if err := checkRepoEntry(r); err != nil {
			errs = append(errs, fmt.Errorf("allowed_repos: %w", err))
		}
	}
	if _, _, err := g.EgressPolicy(); err != nil {
		errs = append(errs, fmt.Errorf("egress: %w", err))
	}
	return errors.Join(errs...)
}

func checkRepoEntry(r string) error {
	if r == "*" {
		return nil
	}
	if r == "" || strings.HasPrefix(r, "/") || strings.HasSuffix(r, "/") || strings.Contains(r, "//") ||
		strings.ContainsAny(r, " \t*:") {
		return fmt.Errorf("%q is not a forge path (an owner or group such as acme, a repository such as acme/app, or *)", r)
	}
	return nil
}

// Combine returns the guardrail in force for a sandbox in project of org:
// the smaller of each ceiling, and the repositories both allow.
func Combine(org, project Guardrail) Guardrail {
	out := Guardrail{
		MaxSandboxes:     minPtr(org.MaxSandboxes, project.MaxSandboxes),
		MaxSandboxMemory: minPtr(org.MaxSandboxMemory, project.MaxSandboxMemory),
		MaxSandboxCPU:    minPtr(org.MaxSandboxCPU, project.MaxSandboxCPU),
		MaxSandboxTTL:    minPtr(org.MaxSandboxTTL, project.MaxSandboxTTL),
		AllowedRepos:     []string{},
	}
	switch {
	case org.AllowedRepos == nil:
		// An organisation that sets no list allows no repository.
	case project.AllowedRepos == nil:
		out.AllowedRepos = slices.Clone(org.AllowedRepos)
	default:
		out.AllowedRepos = intersect(org.AllowedRepos, project.AllowedRepos)
	}
	op, oset, _ := org.EgressPolicy()
	pp, pset, _ := project.EgressPolicy()
	switch {
	case oset && pset:
		out.Egress = op.Narrow(pp).Words()
	case oset:
		out.Egress = slices.Clone(org.Egress)
	case pset:
		out.Egress = slices.Clone(project.Egress)
	}
	return out
}

func minPtr[T int | int64 | quantity.Millicores | time.Duration](a, b *T) *T {
	switch {
	case a == nil:
		return b
	case b == nil:
		return a
	case *b < *a:
		return b
	}
	return a
}

// intersect keeps, for each pair of entries where one covers the other, the
// narrower one.
func intersect(a, b []string) []string {
	out := []string{}
	for _, x := range a {
		for _, y := range b {
			switch {
			case covers(x, y):
				out = append(out, y)
			case covers(y, x):
				out = append(out, x)
			}
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// covers reports whether entry allows everything path names.
func covers(entry, path string) bool {
	if entry == "*" {
		return true
	}
	if path == "*" {
		return false
	}
	e, p := strings.ToLower(entry), strings.ToLower(path)
	return e == p || strings.HasPrefix(p, e+"/")
}

// AllowsRepo reports whether the guardrail allows a repository, named by its
// path on the forge such as "acme/app". Case does not matter.
func (g Guardrail) AllowsRepo(path string) bool {
	path = strings.Trim(path, "/")
	path = strings.TrimSuffix(path, ".git")
	for _, e := range g.AllowedRepos {
		if covers(e, path) {
			return true
		}
	}
	return false
}

// CheckSize refuses a machine larger than a ceiling (SPEC S7): it never
// quietly gives a smaller one.
func (g Guardrail) CheckSize(cpu quantity.Millicores, memory quantity.Bytes) error {
	if g.MaxSandboxCPU != nil && cpu > *g.MaxSandboxCPU {
		return fault.Errorf(fault.Exceeded, "%s cores is more than the guardrail's max_sandbox_cpu of %s", cpu, *g.MaxSandboxCPU)
	}
	if g.MaxSandboxMemory != nil && memory.MiB() > *g.MaxSandboxMemory {
		return fault.Errorf(fault.Exceeded, "%s of memory is more than the guardrail's max_sandbox_memory of %s", memory, quantity.FormatMiB(*g.MaxSandboxMemory))
	}
	return nil
}

// CutTTL shortens ttl to the guardrail's max_sandbox_ttl (SPEC S3: cut, not
// refused).
func (g Guardrail) CutTTL(ttl time.Duration) time.Duration {
	if g.MaxSandboxTTL != nil && ttl > *g.MaxSandboxTTL {
		return *g.MaxSandboxTTL
	}
	return ttl
}

// CheckCount refuses one more live sandbox in a scope that already has live
// of them under limit. scope names it in the message ("organisation acme").
func CheckCount(limit *int, live int, scope string) error {
	if limit != nil && live >= *limit {
		return fault.Errorf(fault.Exceeded, "%s has %d live sandboxes, its max_sandboxes is %d", scope, live, *limit)
	}
	return nil
}

// String words the guardrail as the CLI's flags name its fields, unset
// ones included, for the audit log: "max-sandboxes=10
// max-sandbox-memory=none max-sandbox-cpu=4 max-sandbox-ttl=8h
// allowed-repos=[acme/app,acme/web] egress=unset".
func (g Guardrail) String() string {
	field := func(name string, set bool, v func() string) string {
		if !set {
			return name + "=none"
		}
		return name + "=" + v()
	}
	repos := "unset"
	if g.AllowedRepos != nil {
		repos = "[" + strings.Join(g.AllowedRepos, ",") + "]"
	}
	return strings.Join([]string{
		field("max-sandboxes", g.MaxSandboxes != nil, func() string { return fmt.Sprint(*g.MaxSandboxes) }),
		field("max-sandbox-memory", g.MaxSandboxMemory != nil, func() string { return quantity.FormatMiB(*g.MaxSandboxMemory) }),
		field("max-sandbox-cpu", g.MaxSandboxCPU != nil, func() string { return g.MaxSandboxCPU.String() }),
		field("max-sandbox-ttl", g.MaxSandboxTTL != nil, func() string { return quantity.FormatDuration(*g.MaxSandboxTTL) }),
		"allowed-repos=" + repos,
		"egress=" + egressText(g.Egress),
	}, " ")
}

func egressText(e []string) string {
	if e == nil {
		return "unset"
	}
	return "[" + strings.Join(e, ",") + "]"
}
