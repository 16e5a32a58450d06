package class

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"

	"berth.dev/berth/internal/account"
	"berth.dev/berth/internal/audit"
	"berth.dev/berth/internal/fault"
	"berth.dev/berth/internal/guardrail"
	"berth.dev/berth/internal/paging"
)

// Status is a class with whether the caller could start one in the
// default project now, and why not.
type Status struct {
	Class
	Startable bool
	Reason    string
}

// List lists a page of an organisation's classes by name (empty
// orgRef: the caller's) and whether the default project's quota lets the
// caller start each one, and the key of its last one when more follow.
func (s *Service) List(ctx context.Context, p account.Principal, orgRef string, pg paging.Request) ([]Status, *paging.Key, error) {
	org, err := s.accounts.Organisation(ctx, p, orgRef)
	if err != nil {
		return nil, nil, err
	}
	classes, next, err := s.store.ListClasses(ctx, org.ID, pg)
	if err != nil {
		return nil, nil, fmt.Errorf("list classes: %w", err)
	}
	prj, err := s.accounts.DefaultProject(ctx, org.ID)
	if err != nil {
		return nil, nil, err
	}
	g, err := s.accounts.EffectiveGuardrail(ctx, org.ID, prj.ID)
	if err != nil {
		return nil, nil, err
	}
	out := make([]Status, len(classes))
	for i, c := range classes {
		out[i] = Status{Class: c, Startable: true}
		if reason := s.whyNot(c, g); reason != "" {
			out[i].Startable, out[i].Reason = false, reason
		}
	}
	return out, next, nil
}

func (s *Service) whyNot(c Class, g guardrail.Guardrail) string {
	if s.cfg.NoSandboxes {
		return "this deployment runs no sandboxes"
	}
	if !s.mapped(c) {
		return fmt.Sprintf("tier %s is not mapped (%s)", c.Isolation, c.Isolation.Setting())
	}
	if err := g.CheckSize(c.CPU, c.Memory); err != nil {
		return err.Error()
	}
	return ""
}

// mapped reports whether the deployment maps c's tier to a runtime: a
// class of a tier it does not cannot start sandboxes (SPEC S4, S5).
func (s *Service) mapped(c Class) bool {
	_, ok := s.cfg.Runtimes[c.Isolation]
	return ok
}

// unmapped words the warning for a class applied at a tier this
// deployment has not mapped: it is written, but starts nothing yet.
func (s *Service) unmapped(c Class) string {
	msg := fmt.Sprintf("class %s: tier %s is not mapped to a runtime, so it cannot start sandboxes until an operator sets %s", c.Name, c.Isolation, c.Isolation.Setting())
	if c.Isolation == DefaultIsolation {
		var here []string
		for t := range s.cfg.Runtimes {
			here = append(here, string(t))
		}
		slices.Sort(here)
		msg += fmt.Sprintf(" (%s is the tier of a class that names no isolation:", DefaultIsolation)
		if len(here) > 0 {
			msg += "; this deployment runs " + strings.Join(here, ", ")
		}
		msg += ")"
	}
	return msg
}

// Applied says what Apply wrote, and what will not work yet.
type Applied struct {
	Created  []string
	Updated  []string
	Warnings []string
}

// Apply reads a sandboxes file, checks all of it, and only then
// upserts every class it names; classes it does not name are left alone
// (SPEC S4). Administrators of the organisation and operators only; an
// administrator may set only images the image rule allows.
func (s *Service) Apply(ctx context.Context, p account.Principal, orgRef string, file io.Reader) (Applied, error) {
	org, err := s.accounts.Organisation(ctx, p, orgRef)
	if err != nil {
		return Applied{}, err
	}
	if !p.IsAdminOf(org.ID) {
		return Applied{}, fault.Errorf(fault.Forbidden, "apply classes: only an administrator of %s may", org.Name)
	}
	classes, err := ParseFile(file)
	if err != nil {
		return Applied{}, err
	}
	if err := s.checkCount(ctx, org, classes); err != nil {
		return Applied{}, err
	}
	var refused []error
	var events []audit.Event
	for _, c := range classes {
		current, how := "", "created"
		old, err := s.store.GetClass(ctx, org.ID, c.Name)
		switch {
		case err == nil:
			current, how = old.Image, "updated"
		case !errors.Is(err, fault.NotFound):
			return Applied{}, err
		}
		events = append(events, audit.Event{At: s.now(), Org: org.ID, Actor: p.User.ID, Action: audit.ClassApply, Target: c.Name,
			Detail: fmt.Sprintf("%s: image %s, tier %s, cpu %s, memory %s", how, c.Image, c.Isolation, c.CPU, c.Memory)})
		if !p.IsOperator() && !s.images.Allows(c.Image, current) {
			refused = append(refused, fmt.Errorf("class %s: image %s is not in the sandboxes file nor allowed by BERTH_SANDBOX_IMAGES; an operator must set it", c.Name, c.Image))
		}
	}
	if len(refused) > 0 {
		return Applied{}, fault.Errorf(fault.Forbidden, "apply classes: %w", errors.Join(refused...))
	}
	created, err := s.store.PutClasses(ctx, org.ID, classes, events...)
	if err != nil {
		return Applied{}, fmt.Errorf("apply classes: %w", err)
	}
	res := Applied{Created: created}
	isNew := map[string]bool{}
	for _, n := range created {
		isNew[n] = true
	}
	for _, c := range classes {
		if !isNew[c.Name] {
			res.Updated = append(res.Updated, c.Name)
		}
		if !s.mapped(c) {
			res.Warnings = append(res.Warnings, s.unmapped(c))
		}
	}
	s.log.InfoContext(ctx, "classes applied", "org", org.ID, "user", p.User.ID, "created", res.Created, "updated", res.Updated)
	s.syncPools(ctx) // a class's pool follows its warm
	return res, nil
}

// checkCount refuses an apply after which org would have more than
// MaxClasses classes, so a list of them stays bounded. (Two applies at
// once may together pass it by what each adds; neither passes alone.)
func (s *Service) checkCount(ctx context.Context, org account.Organisation, classes []Class) error {
	have, _, err := s.store.ListClasses(ctx, org.ID, paging.Request{})
	if err != nil {
		return fmt.Errorf("apply classes: %w", err)
	}
	names := map[string]bool{}
	for _, c := range append(have, classes...) {
		names[c.Name] = true
	}
	if len(names) > MaxClasses {
		return fault.Field(fileTopLevel, "%s would have %d classes; at most %d (berth sandbox delete-class removes one)", org.Name, len(names), MaxClasses)
	}
	return nil
}

// Delete removes one class. Sandboxes made from it keep their own copy
// of its image, tier and resources.
func (s *Service) Delete(ctx context.Context, p account.Principal, orgRef, name string) error {
	org, err := s.accounts.Organisation(ctx, p, orgRef)
	if err != nil {
		return err
	}
	if !p.IsAdminOf(org.ID) {
		return fault.Errorf(fault.Forbidden, "delete class: only an administrator of %s may", org.Name)
	}
	e := audit.Event{At: s.now(), Org: org.ID, Actor: p.User.ID, Action: audit.ClassDelete, Target: name}
	if err := s.store.DeleteClass(ctx, org.ID, name, e); err != nil {
		return fmt.Errorf("delete class %s: %w", name, err)
	}
	s.log.InfoContext(ctx, "class deleted", "org", org.ID, "user", p.User.ID, "class", name)
	s.syncPools(ctx) // pools do not outlive their class (SPEC S12)
	return nil
}

// Seed gives a new organisation its copies of the template classes.
func (s *Service) Seed(ctx context.Context, org string) error {
	return Seeder(s.store, s.cfg.Template)(ctx, org)
}

// Writer is the store's side of Seeder.
type Writer interface {
	PutClasses(ctx context.Context, org string, classes []Class, events ...audit.Event) (created []string, err error)
}

// Seeder is the hook account.Service calls for each new organisation: it
// writes the organisation's copies of the template classes through st.
// It needs no Service, so the accounts are made first, and alone where
// nothing else is needed (berth admin bootstrap).
func Seeder(st Writer, template []Class) func(ctx context.Context, org string) error {
	return func(ctx context.Context, org string) error {
		if len(template) == 0 {
			return nil
		}
		_, err := st.PutClasses(ctx, org, template)
		return err
	}
}

// syncPools tells the pools the classes changed, logging a failure: the
// next sweep tries again.
func (s *Service) syncPools(ctx context.Context) {
	if s.pools == nil {
		return
	}
	if err := s.pools.SyncPools(ctx); err != nil && ctx.Err() == nil {
		s.log.WarnContext(ctx, "warm pools not in step with the classes", "err", err)
	}
}
