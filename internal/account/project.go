package account

import (
	"context"
	"errors"
	"fmt"

	"berth.dev/berth/internal/audit"
	"berth.dev/berth/internal/fault"
)

// SetProject sets the project a user's new sandboxes and keys land in
// (SPEC S2): only an administrator of the user's organisation chooses it,
// as they alone choose a sandbox's project; a member never does. Sandboxes
// made before stay where they are.
func (s *Service) SetProject(ctx context.Context, p Principal, orgRef, userRef, projectRef string) (User, Project, error) {
	org, err := s.Organisation(ctx, p, orgRef)
	if err != nil {
		return User{}, Project{}, err
	}
	if !p.IsAdminOf(org.ID) {
		return User{}, Project{}, fault.Errorf(fault.Forbidden, "set a user's project: only an administrator of %s may (a member's sandboxes go where an administrator says)", org.Name)
	}
	u, err := s.store.FindUser(ctx, org.ID, userRef)
	if err != nil {
		return User{}, Project{}, err
	}
	if projectRef == "" {
		return User{}, Project{}, fault.Field("project", "is required: the project's name or id (berth project list)")
	}
	prj, err := s.store.GetProject(ctx, org.ID, projectRef)
	if errors.Is(err, fault.NotFound) {
		return User{}, Project{}, fault.Field("project", "no project %q in %s (berth project list)", projectRef, org.Name)
	}
	if err != nil {
		return User{}, Project{}, err
	}
	e := audit.Event{At: s.now(), Org: org.ID, Actor: p.User.ID, Action: audit.UserProject, Target: u.Name,
		Detail: fmt.Sprintf("%s (%s): new sandboxes and keys land in %s (%s)", u.Name, u.ID, prj.Name, prj.ID)}
	if err := s.store.SetUserProject(ctx, u.ID, prj.ID, e); err != nil {
		return User{}, Project{}, fmt.Errorf("set the project of %s: %w", u.Name, err)
	}
	u.Project = prj.ID
	return u, prj, nil
}

// HomeProject is the project u's new sandboxes and keys land in: the one
// an administrator set, else the organisation's oldest.
func (s *Service) HomeProject(ctx context.Context, u User) (Project, error) {
	if u.Project != "" {
		return s.store.GetProject(ctx, u.Org, u.Project)
	}
	return s.DefaultProject(ctx, u.Org)
}
