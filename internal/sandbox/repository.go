package sandbox

import (
	"context"

	"berth.dev/berth/internal/forge"
)

// Repositories is what the service needs to reach sandboxes' repositories
// (package repository implements it): the service calls it during creates,
// starts and ends, and makes every state change itself.
type Repositories interface {
	// Resolve names the repository at addr on the deployment's forge, if
	// the guardrails of org and project allow it; the refusal names the
	// field repo.
	Resolve(ctx context.Context, org, project, addr string) (forge.Repo, error)
	// Allowed refuses sb's repository when the guardrails no longer allow
	// it.
	Allowed(ctx context.Context, sb Sandbox) error
	// Mint gets and records a token for a token-mode sandbox, lasting no
	// longer than it; actor is who asked.
	Mint(ctx context.Context, sb Sandbox, actor string) (forge.Token, error)
	// Revoke takes back every credential sb holds but the one whose token
	// id is keep.
	Revoke(ctx context.Context, sb Sandbox, keep string)
	// Env is the repository part of sb's environment, with t when it holds
	// a token.
	Env(sb Sandbox, t forge.Token) map[string]string
	// Pushed and Refused record what a push did, or why it was refused.
	Pushed(ctx context.Context, sb Sandbox, done []forge.RefUpdate)
	Refused(ctx context.Context, sb Sandbox, why map[string]string)
}
