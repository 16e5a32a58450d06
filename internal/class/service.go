package class

import (
	"context"
	"log/slog"
	"time"

	"berth.dev/berth/internal/account"
	"berth.dev/berth/internal/audit"
	"berth.dev/berth/internal/guardrail"
	"berth.dev/berth/internal/paging"
)

// Store is what the class service needs from the database. PutClasses and
// DeleteClass start something new, so they may be refused with
// fault.Busy when the database cannot take them in time, having
// written nothing, their audit events included.
type Store interface {
	// ListClasses returns a page of an organisation's classes by name, and
	// the key of its last one when more follow.
	ListClasses(ctx context.Context, org string, pg paging.Request) ([]Class, *paging.Key, error)
	// GetClass is fault.NotFound for a class the organisation does not have.
	GetClass(ctx context.Context, org, name string) (Class, error)
	// PutClasses upserts every class in one transaction and returns the
	// names of those that did not exist before. It and DeleteClass record
	// events with their write.
	PutClasses(ctx context.Context, org string, classes []Class, events ...audit.Event) (created []string, err error)
	DeleteClass(ctx context.Context, org, name string, events ...audit.Event) error
}

// Accounts is what the class service needs to know about organisations,
// their default projects and guardrails.
type Accounts interface {
	Organisation(ctx context.Context, p account.Principal, ref string) (account.Organisation, error)
	DefaultProject(ctx context.Context, org string) (account.Project, error)
	EffectiveGuardrail(ctx context.Context, org, project string) (guardrail.Guardrail, error)
}

// Pools keeps the warm pools in step with the classes (SPEC S12):
// package warm, told after every apply and delete.
type Pools interface {
	SyncPools(ctx context.Context) error
}

// Config is the deployment's class settings (SPEC S4, S16), read once by
// the composition root.
type Config struct {
	// Template is the sandboxes file (BERTH_SANDBOXES_FILE): the classes
	// each new organisation starts with, and images an administrator may
	// use (the image rule).
	Template []Class
	// AllowedImages is BERTH_SANDBOX_IMAGES (the image rule).
	AllowedImages []string
	// Runtimes are the tiers the deployment maps to a runtime (the
	// sandbox service's); a class of another tier cannot start sandboxes.
	Runtimes map[Tier]string
	// NoSandboxes says the deployment runs none (it has no driver).
	NoSandboxes bool
}

// Service lists, applies, deletes and seeds an organisation's classes.
type Service struct {
	store    Store
	accounts Accounts
	pools    Pools // nil: none
	cfg      Config
	images   ImagePolicy
	log      *slog.Logger
	now      func() time.Time
}

// NewService returns a Service. pools may be nil: then no pool follows a
// class.
func NewService(store Store, accounts Accounts, pools Pools, cfg Config, log *slog.Logger, now func() time.Time) *Service {
	images := ImagePolicy{Allowed: cfg.AllowedImages}
	for _, c := range cfg.Template {
		images.Template = append(images.Template, c.Image)
	}
	return &Service{store: store, accounts: accounts, pools: pools, cfg: cfg, images: images, log: log, now: now}
}
