package server

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"os"
	"time"

	"berth.dev/berth/internal/account"
	"berth.dev/berth/internal/fault"
	"berth.dev/berth/internal/forge"
	"berth.dev/berth/internal/repository"
	"berth.dev/berth/internal/sandbox"
	"berth.dev/berth/internal/store"
	"berth.dev/berth/internal/trigger"
)

// buildTriggers makes the projects' triggers, with the GitHub App's
// webhook secret when one is configured.
func buildTriggers(cfg Config, st *store.Store, accounts *account.Service, repos *repository.Service, sandboxes *sandbox.Service, fg forge.Forge, secrets egressSecrets, log *slog.Logger) (*trigger.Service, error) {
	tc := trigger.Config{Key: secrets.triggers, MaxTask: sandbox.MaxTask}
	if cfg.GitHookSecret != "" {
		b, err := os.ReadFile(cfg.GitHookSecret)
		if err != nil {
			return nil, fmt.Errorf("BERTH_SANDBOX_GIT_WEBHOOK_SECRET_FILE: %w", err)
		}
		if tc.GitHubSecret = bytes.TrimSpace(b); len(tc.GitHubSecret) == 0 {
			return nil, fmt.Errorf("BERTH_SANDBOX_GIT_WEBHOOK_SECRET_FILE: %s is empty", cfg.GitHookSecret)
		}
	}
	var rs trigger.Repositories = noRepositories{}
	if fg != nil {
		rs = repos
	}
	return trigger.NewService(st, accounts, rs, sandboxes, fg, tc, log, time.Now), nil
}

// noRepositories resolves none: a deployment without a forge.
type noRepositories struct{}

func (noRepositories) Resolve(context.Context, string, string, string) (forge.Repo, error) {
	return forge.Repo{}, fault.Field("repo", "this deployment has no forge (BERTH_SANDBOX_GIT_FORGE is unset)")
}
