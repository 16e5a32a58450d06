// Package agentrun runs agent sandboxes' tasks (SPEC S13), one floor
// above package sandbox: the runner, image and model a run starts on, the
// prompt file, the start of a run and the following of its output, the
// in-machine runs' routes (task, output, exit), run logs, what the gateway
// metered of a run's session, reviewer verdicts, and how a run concludes.
// The sandbox service asks it at create, around a start and at an agent
// sandbox's end (it is the service's sandbox.Runs); how a run's sandbox
// ends it asks of the sandbox service (EndRun), whose one write path makes
// every state change.
package agentrun

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"berth.dev/berth/internal/account"
	"berth.dev/berth/internal/agentconfig"
	"berth.dev/berth/internal/forge"
	"berth.dev/berth/internal/runner"
	"berth.dev/berth/internal/sandbox"
)

// Store is what runs need from the database.
type Store interface {
	// GetSandbox reads a sandbox's row; fault.NotFound without one.
	GetSandbox(ctx context.Context, id sandbox.ID) (sandbox.Sandbox, error)
	// PutRun writes an agent sandbox's run (Sandbox, Seq) whole, except
	// that a run's end once set is kept; GetRun reads its latest run,
	// fault.NotFound for a sandbox without one.
	PutRun(ctx context.Context, r Run) error
	GetRun(ctx context.Context, id sandbox.ID) (Run, error)
	// ListRuns lists a sandbox's runs, Seq ascending: a session's tasks.
	ListRuns(ctx context.Context, id sandbox.ID) ([]Run, error)
	// PutRunOutput writes what a run's output said (its telemetry and
	// line counts; a kelos image's outputs, results and setup), and
	// nothing else of it.
	PutRunOutput(ctx context.Context, r Run) error
	// ClaimRunEnd sets the end of a run still running whose end is not
	// set yet, in one statement; fault.Conflict when it is over or
	// set (an in-machine run's end is reported once).
	ClaimRunEnd(ctx context.Context, id sandbox.ID, at time.Time) error
}

// Sandboxes is what runs ask of the sandbox service.
type Sandboxes interface {
	// Get finds a sandbox the caller may see (SPEC S6).
	Get(ctx context.Context, p account.Principal, ref string) (sandbox.Sandbox, error)
	// EndRun ends the sandbox of a run that is over: to terminated or
	// failed, for reason, its running time closed at exited (zero: now).
	EndRun(ctx context.Context, id sandbox.ID, to sandbox.State, reason string, exited time.Time) error
	// EndTask suspends a session whose task's run is over, for reason,
	// its running time closed at exited (zero: now).
	EndTask(ctx context.Context, id sandbox.ID, reason string, exited time.Time) error
}

// Users names the user who ended a run.
type Users interface {
	User(ctx context.Context, id string) (account.User, error)
}

// Pushes records what happened to a run's work (SPEC S17): the host's
// push audited like any push, or its refusal.
type Pushes interface {
	Pushed(ctx context.Context, sb sandbox.Sandbox, done []forge.RefUpdate)
	Refused(ctx context.Context, sb sandbox.Sandbox, why map[string]string)
}

// Models lists the models a project's key may reach, each with the APIs
// its provider speaks (SPEC S14, S15): a run's model is chosen among them
// for its runner, and its CLI's configuration lists them.
type Models interface {
	Reachable(ctx context.Context, org, project string) ([]runner.Model, error)
}

// Holds marks the sandboxes whose run this replica reads, so the sweeping
// replica leaves them alone (sandbox.Replicas holds them).
type Holds interface {
	Hold(ctx context.Context, id sandbox.ID) (release func(), err error)
}

// Config is how the deployment runs agents (SPEC S13).
type Config struct {
	// Driver names the sandbox driver for messages.
	Driver string
	// PublicURL is the gateway as a sandbox reaches it (BERTH_BASE_URL).
	PublicURL string
	// Workspaces makes runs' checkouts; nil: agent sandboxes run no
	// runner.
	Workspaces Workspaces
	// Pushes records each run's push; nil records nothing.
	Pushes Pushes
	// Images maps each runner to its image; a runner without one is
	// refused before any container starts.
	Images map[string]string
	// Runner is the runner an agent sandbox gets when it names none.
	Runner string
	// Model is the model a run starts on when nothing routes another.
	Model string
	// Network is "allowlist" (default) or "open".
	Network string
	// Logs keeps runs' logs; nil: files in LogDir.
	Logs RunLogs
	// LogDir keeps each run's log.
	LogDir string
	// Prices prices a run whose CLI reports no cost; nil: runner.ListPrices.
	Prices runner.Prices
}

// Service runs agent sandboxes' tasks.
type Service struct {
	store     Store
	sandboxes Sandboxes
	driver    sandbox.Driver // nil when the deployment runs no sandboxes
	users     Users
	work      Workspaces
	models    Models       // nil: no model to call
	meter     SessionMeter // nil: runs show the agent's figures only
	holds     Holds
	cfg       Config
	log       *slog.Logger
	now       func() time.Time

	reports  Reports      // nil: runs owe their forge nothing
	learning Learning     // nil: no sandbox's learning is ended here
	agentCfg AgentConfigs // nil: runs get no agent configuration

	mu        sync.Mutex
	following map[sandbox.ID]int // runs whose output (or in-machine report) is being read
}

// Learning ends a learning sandbox's learning (egress learn, the
// gateway's egress proxy): its setup is over.
type Learning interface {
	EndLearning(ctx context.Context, sb sandbox.Sandbox, why string)
}

// AgentConfigs are the organisations' and projects' agent configurations
// a run starts with (package agentconfig).
type AgentConfigs interface {
	ForRun(ctx context.Context, org, project string) (agentconfig.Config, error)
}

// WithAgentConfigs gives runs their agent configuration.
func WithAgentConfigs(a AgentConfigs) Option { return func(s *Service) { s.agentCfg = a } }

// Reports are told that a run ended: what it owes its forge (a draft
// pull request, a comment) is made then (package trigger).
type Reports interface {
	Concluded(ctx context.Context, id sandbox.ID)
}

// SetReports tells the service whom to tell that a run ended.
func (s *Service) SetReports(r Reports) { s.reports = r }

// SetLearning tells the service who ends a learning sandbox's learning
// when a kelos image's setup command says it ended.
func (s *Service) SetLearning(l Learning) { s.learning = l }

// Option sets an optional dependency of a Service.
type Option func(*Service)

// WithModels gives runs their models; without it a run is refused: it
// would have none to call.
func WithModels(m Models) Option { return func(s *Service) { s.models = m } }

// WithReplicas makes the service one of several replicas on one database:
// it holds each run it reads.
func WithReplicas(h Holds) Option { return func(s *Service) { s.holds = h } }

// NewService returns a Service that ends runs' sandboxes through
// sandboxes. Hand it to the sandbox service (SetRuns) when Workspaces is
// set.
func NewService(st Store, sandboxes Sandboxes, driver sandbox.Driver, users Users, cfg Config, log *slog.Logger, now func() time.Time, opts ...Option) *Service {
	if cfg.Pushes == nil {
		cfg.Pushes = unrecorded{}
	}
	s := &Service{store: st, sandboxes: sandboxes, driver: driver, users: users, work: cfg.Workspaces, holds: alone{}, cfg: cfg, log: log, now: now,
		following: map[sandbox.ID]int{}}
	for _, o := range opts {
		o(s)
	}
	return s
}

var _ sandbox.Runs = (*Service)(nil)

// unrecorded records no push.
type unrecorded struct{}

func (unrecorded) Pushed(context.Context, sandbox.Sandbox, []forge.RefUpdate)  {}
func (unrecorded) Refused(context.Context, sandbox.Sandbox, map[string]string) {}

// alone holds nothing: a gateway that shares its database with no other.
type alone struct{}

func (alone) Hold(context.Context, sandbox.ID) (func(), error) { return func() {}, nil }

// hold holds id for this replica and returns its release. A hold that
// cannot be taken is logged and the work goes on: at worst the leader's
// sweep looks at the sandbox too.
func (s *Service) hold(ctx context.Context, id sandbox.ID) func() {
	release, err := s.holds.Hold(ctx, id)
	if err != nil {
		s.log.WarnContext(ctx, "could not hold a sandbox for this replica", "sandbox", id, "err", err)
		return func() {}
	}
	return release
}

// Following reports whether this replica is reading id's run.
func (s *Service) Following(id sandbox.ID) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.following[id] > 0
}

// agentRun reports whether sb is an agent run: an agent sandbox with a
// runner, on a deployment that can run it.
func (s *Service) agentRun(sb sandbox.Sandbox) bool {
	return sb.Purpose == sandbox.PurposeAgent && sb.Runner != "" && s.work != nil
}
