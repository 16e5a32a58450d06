package sandbox

import (
	"context"
	"errors"
	"slices"

	"berth.dev/berth/internal/account"
	"berth.dev/berth/internal/fault"
)

// Best of N (SPEC S13): a reviewer created with Compare reads the pushed
// work of several agent sandboxes (a session's forks, each one attempt
// at the same task) and names the best in its verdict. The runs service
// checks each has pushed work to compare (Runs.Choose) and puts it in
// the reviewer's checkout.

// compared resolves the agent sandboxes whose work the reviewer sb
// compares, named in refs as p sees them; nil when refs is empty.
func (s *Service) compared(ctx context.Context, p account.Principal, sb Sandbox, refs []string) ([]ID, error) {
	if len(refs) == 0 {
		return nil, nil
	}
	switch {
	case sb.Purpose != PurposeAgent || sb.Role != RoleReviewer:
		return nil, fault.Field("compare", "only a reviewer compares attempts: add --purpose agent --role reviewer")
	case sb.Session:
		return nil, fault.Field("compare", "a reviewer that compares attempts runs once: it is no session")
	case len(refs) < 2 || len(refs) > MaxForks:
		return nil, fault.Field("compare", "%d sandboxes named; a reviewer compares 2 to %d", len(refs), MaxForks)
	}
	ids := make([]ID, 0, len(refs))
	for _, ref := range refs {
		other, err := s.resolve(ctx, p, ref)
		if errors.Is(err, fault.NotFound) {
			return nil, fault.Field("compare", "no sandbox %q of yours to compare", cut(ref))
		}
		if err != nil {
			return nil, err
		}
		switch {
		case other.Purpose != PurposeAgent || other.Role == RoleReviewer:
			return nil, fault.Field("compare", "%s is not an agent's attempt: a reviewer compares authors' work", other.Name)
		case other.Repo != sb.Repo:
			return nil, fault.Field("compare", "%s works on %s, not on %s: a reviewer compares work on its own repository", other.Name, other.Repo, sb.Repo)
		case slices.Contains(ids, other.ID):
			return nil, fault.Field("compare", "%s is named twice", other.Name)
		}
		ids = append(ids, other.ID)
	}
	return ids, nil
}

// cut bounds a caller's text quoted back in an error.
func cut(s string) string {
	if len(s) > 64 {
		return s[:64] + "…"
	}
	return s
}
