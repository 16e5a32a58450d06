package sandbox

import (
	"context"
	"fmt"

	"berth.dev/berth/internal/account"
)

// Counts is how many live sandboxes count against an organisation's
// max_sandboxes, in all and in each of its projects (SPEC S7).
type Counts struct {
	Org      int
	Projects map[string]int // by project id; a project with none is absent
}

// LiveCounts counts the live sandboxes of an organisation (empty orgRef:
// the caller's), for showing what is left of its quotas. Anybody in the
// organisation may read them: they say how many, never whose, as a refused
// create does.
func (s *Service) LiveCounts(ctx context.Context, p account.Principal, orgRef string) (Counts, error) {
	org, err := s.accounts.Organisation(ctx, p, orgRef)
	if err != nil {
		return Counts{}, err
	}
	sbs, err := s.store.ListSandboxes(ctx, Filter{Org: org.ID})
	if err != nil {
		return Counts{}, fmt.Errorf("count live sandboxes of %s: %w", org.Name, err)
	}
	out := Counts{Projects: map[string]int{}}
	for _, sb := range sbs {
		if sb.Live() {
			out.Org++
			out.Projects[sb.Project]++
		}
	}
	return out, nil
}
