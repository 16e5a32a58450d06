package trigger

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"berth.dev/berth/internal/account"
	"berth.dev/berth/internal/agentconfig"
	"berth.dev/berth/internal/audit"
	"berth.dev/berth/internal/fault"
	"berth.dev/berth/internal/forge"
	"berth.dev/berth/internal/sandbox"
	"berth.dev/berth/internal/schedule"
	"berth.dev/berth/internal/trigger/event"
)

// Delivery is one event handed to one trigger, and what became of it.
// (trigger, id) is recorded once: a redelivery starts nothing new.
type Delivery struct {
	Trigger string
	ID      string // the sender's delivery id
	At      time.Time
	Outcome Outcome
	Reason  string     // why it was skipped or failed
	Sandbox sandbox.ID // the run it started
	Thread  forge.Thread
	URL     string // the thread's web page
}

// Outcome is what became of a delivery; "" while its run is started.
type Outcome string

// InFlight is how long a delivery recorded and not finished counts
// against its trigger's concurrency: a gateway that stopped while it
// started the run leaves it so, and it stops counting then.
const InFlight = 2 * time.Minute

const (
	Started Outcome = "started"
	Skipped Outcome = "skipped" // a limit or the budget said no, or the trigger's author cannot start runs
	Failed  Outcome = "failed"  // the run could not be created
)

// Store keeps triggers, their deliveries and reports.
type Store interface {
	// PutTrigger writes t whole, inserting it or replacing the one of its
	// id; fault.Conflict when another of its project has its name, or the
	// project has MaxTriggers already.
	PutTrigger(ctx context.Context, t Trigger, e audit.Event) error
	GetTrigger(ctx context.Context, id string) (Trigger, error)
	TriggerByName(ctx context.Context, org, project, name string) (Trigger, error)
	ListTriggers(ctx context.Context, org, project string) ([]Trigger, error)
	// TriggersOn lists every organisation's triggers on source for repo.
	TriggersOn(ctx context.Context, source event.Source, repo string) ([]Trigger, error)
	DeleteTrigger(ctx context.Context, id string, e audit.Event) error
	// AddDelivery records d; fault.Conflict when (d.Trigger, d.ID) is
	// recorded already. In the same transaction it counts the trigger's
	// runs that are live or on their way (a delivery recorded in the last
	// InFlight and not finished), hands the count to admit, and records d
	// with the outcome and reason admit gives ("" while its run is
	// started): deliveries racing on replicas cannot together pass the
	// trigger's concurrency. It returns d as recorded.
	AddDelivery(ctx context.Context, d Delivery, admit func(live int) (Outcome, string)) (Delivery, error)
	// FinishDelivery writes d's outcome, reason and sandbox.
	FinishDelivery(ctx context.Context, d Delivery) error
	// Deliveries lists a trigger's deliveries since at, newest first, at
	// most limit.
	Deliveries(ctx context.Context, trigger string, since time.Time, limit int) ([]Delivery, error)
	// DueSchedules lists the schedules' triggers whose next firing is at
	// or before now.
	DueSchedules(ctx context.Context, now time.Time, limit int) ([]Trigger, error)
	// AdvanceSchedule moves a trigger's next firing from from to to, only
	// if it is still from (fault.Conflict when another replica moved it):
	// the one that moves it fires it.
	AdvanceSchedule(ctx context.Context, id string, from, to time.Time) error
	// LiveRuns lists the trigger's runs whose sandboxes are starting,
	// running or suspended.
	LiveRuns(ctx context.Context, trigger string) ([]sandbox.ID, error)
	ReportStore
}

// Sandboxes creates the runs and gives sessions their next tasks.
type Sandboxes interface {
	Create(ctx context.Context, p account.Principal, req sandbox.CreateRequest) (sandbox.Sandbox, error)
	NextTask(ctx context.Context, p account.Principal, ref, task string) (sandbox.Sandbox, error)
}

// Accounts is what triggers need of accounts.
type Accounts interface {
	Scope(ctx context.Context, p account.Principal, orgRef, projectRef string) (org, project string, err error)
	User(ctx context.Context, id string) (account.User, error)
}

// Repositories resolves a trigger's repository as a create would
// (allowed_repos applies).
type Repositories interface {
	Resolve(ctx context.Context, org, project, addr string) (forge.Repo, error)
}

// Settings are the projects' agent configurations, whose pull_requests
// off keeps their runs from opening pull requests.
type Settings interface {
	ForRun(ctx context.Context, org, project string) (agentconfig.Config, error)
}

// SetSettings tells the service where projects say whether their runs
// open pull requests.
func (s *Service) SetSettings(st Settings) { s.settings = st }

// opensPullRequests reports whether org's project lets its runs open
// pull requests (its agent configuration's pull_requests).
func (s *Service) opensPullRequests(ctx context.Context, org, project string) (bool, error) {
	if s.settings == nil {
		return true, nil
	}
	c, err := s.settings.ForRun(ctx, org, project)
	if err != nil {
		return false, err
	}
	return c.OpensPullRequests(), nil
}

// Config is the deployment's part.
type Config struct {
	// Key derives each trigger's webhook secret (HMAC of its id), so no
	// secret is stored: it is the deployment's secrets key.
	Key []byte
	// GitHubSecret is the GitHub App's webhook secret; nil: GitHub's
	// deliveries are refused.
	GitHubSecret []byte
	// MaxTask bounds a rendered task (the sandbox's own limit).
	MaxTask int
}

// Service keeps triggers and hands them deliveries.
type Service struct {
	store    Store
	accounts Accounts
	repos    Repositories
	boxes    Sandboxes
	results  Results        // nil: no report is made
	settings Settings       // nil: every project opens pull requests
	reporter forge.Reporter // nil: the forge takes nothing back
	forge    forge.Forge    // nil: none
	cfg      Config
	log      *slog.Logger
	now      func() time.Time
}

// NewService returns a Service; reporter may be nil (a forge that takes
// no pull requests: the local one).
func NewService(st Store, accounts Accounts, repos Repositories, boxes Sandboxes, f forge.Forge, cfg Config, log *slog.Logger, now func() time.Time) *Service {
	s := &Service{store: st, accounts: accounts, repos: repos, boxes: boxes, forge: f, cfg: cfg, log: log, now: now}
	if r, ok := f.(forge.Reporter); ok {
		s.reporter = r
	}
	if s.cfg.MaxTask == 0 {
		s.cfg.MaxTask = 64 << 10
	}
	return s
}

// CanReport says whether the deployment's forge takes pull requests and
// comments.
func (s *Service) CanReport() bool { return s.reporter != nil }

// GitHubSecret is the GitHub App's webhook secret; nil refuses every
// delivery.
func (s *Service) GitHubSecret() []byte { return s.cfg.GitHubSecret }

// Secret is the trigger's webhook secret: a GitLab webhook's secret token,
// or a generic webhook's HMAC key. It is derived, never stored: setting
// the trigger again keeps it, deleting it ends it.
func (s *Service) Secret(t Trigger) string {
	m := hmac.New(sha256.New, s.cfg.Key)
	m.Write([]byte("berth trigger webhook\x00" + t.ID))
	return "bws_" + hex.EncodeToString(m.Sum(nil))
}

// Set writes a trigger of a project (its organisation's administrators,
// in their own organisation: its runs are their sandboxes). A new one
// gets an id; the same name replaces the old, keeping its id.
func (s *Service) Set(ctx context.Context, p account.Principal, orgRef, projectRef string, t Trigger) (Trigger, error) {
	org, project, err := s.accounts.Scope(ctx, p, orgRef, projectRef)
	if err != nil {
		return Trigger{}, err
	}
	if project == "" {
		return Trigger{}, fault.Field("project", "a trigger belongs to a project")
	}
	if !p.IsAdminOf(org) {
		return Trigger{}, fault.Errorf(fault.Forbidden, "only an administrator of the organisation sets its triggers")
	}
	if p.User.Org != org {
		return Trigger{}, fault.Errorf(fault.Forbidden, "a trigger's runs are its author's sandboxes: set it in your own organisation")
	}
	if err := t.Validate(); err != nil {
		return Trigger{}, err
	}
	repo, err := s.repos.Resolve(ctx, org, project, t.Repo)
	if err != nil {
		return Trigger{}, fmt.Errorf("repo: %w", err)
	}
	if t.On.Source == event.SourceGitHub || t.On.Source == event.SourceGitLab {
		if s.forge == nil || s.forge.Kind() != string(t.On.Source) {
			return Trigger{}, fault.Field("on", "this deployment's forge is %s: its triggers take %s's events or a generic webhook", s.forgeKind(), s.forgeKind())
		}
	}
	if t.OpenPR && s.reporter == nil {
		return Trigger{}, fault.Field("open_pr", "this deployment's forge (%s) takes no pull requests: set open_pr false", s.forgeKind())
	}
	t.Org, t.Project, t.Repo, t.Owner = org, project, repo.String(), p.User.ID
	now := s.now().UTC()
	t.UpdatedAt, t.NextAt = now, time.Time{}
	if t.On.Source == event.SourceSchedule {
		sched, _ := schedule.Parse(t.On.Schedule) // Validate parsed it
		t.NextAt = sched.Next(now).UTC()
	}
	old, err := s.store.TriggerByName(ctx, org, project, t.Name)
	switch {
	case err == nil:
		t.ID, t.CreatedAt = old.ID, old.CreatedAt
	case errors.Is(err, fault.NotFound):
		t.ID, t.CreatedAt = "trg_"+strings.ToLower(rand.Text()[:20]), now
	default:
		return Trigger{}, err
	}
	e := audit.Event{At: now, Org: org, Actor: p.User.ID, Action: audit.TriggerSet, Target: projectRef + "/" + t.Name, Outcome: audit.OK,
		Detail: fmt.Sprintf("on %s, repo %s, class %s, runner %s, role %s, concurrency %d, daily %d tokens $%.2f, open_pr %v",
			t.On, t.Repo, orDefault(t.Class), orDefault(t.Runner), orDefault(t.Role), t.Concurrency, t.DailyTokens, t.DailyUSD, t.OpenPR)}
	if err := s.store.PutTrigger(ctx, t, e); err != nil {
		return Trigger{}, err
	}
	return t, nil
}

func orDefault(s string) string {
	if s == "" {
		return "default"
	}
	return s
}

// repo is the repository a trigger or report names (forge.Repo's
// String: host/path, or the path alone on the local forge).
func (s *Service) repo(named string) forge.Repo {
	if s.forge == nil || s.forge.Host() == "" {
		return forge.Repo{Path: named}
	}
	return forge.Repo{Host: s.forge.Host(), Path: strings.TrimPrefix(named, s.forge.Host()+"/")}
}

// address is how a create names the repository: its clone URL on a
// remote forge, its path on the local one.
func (s *Service) address(named string) string {
	r := s.repo(named)
	if r.Host == "" {
		return r.Path
	}
	return s.forge.CloneURL(r)
}

func (s *Service) forgeKind() string {
	if s.forge == nil {
		return "none"
	}
	return s.forge.Kind()
}

// List lists a project's triggers to whoever may see the organisation.
func (s *Service) List(ctx context.Context, p account.Principal, orgRef, projectRef string) ([]Trigger, error) {
	org, project, err := s.accounts.Scope(ctx, p, orgRef, projectRef)
	if err != nil {
		return nil, err
	}
	return s.store.ListTriggers(ctx, org, project)
}

// Get finds a project's trigger by name with its latest deliveries.
func (s *Service) Get(ctx context.Context, p account.Principal, orgRef, projectRef, name string) (Trigger, []Delivery, error) {
	org, project, err := s.accounts.Scope(ctx, p, orgRef, projectRef)
	if err != nil {
		return Trigger{}, nil, err
	}
	t, err := s.store.TriggerByName(ctx, org, project, name)
	if err != nil {
		return Trigger{}, nil, err
	}
	ds, err := s.store.Deliveries(ctx, t.ID, time.Time{}, 20)
	if err != nil {
		return Trigger{}, nil, err
	}
	return t, ds, nil
}

// Delete removes a project's trigger (administrators); its runs go on.
func (s *Service) Delete(ctx context.Context, p account.Principal, orgRef, projectRef, name string) error {
	org, project, err := s.accounts.Scope(ctx, p, orgRef, projectRef)
	if err != nil {
		return err
	}
	if !p.IsAdminOf(org) {
		return fault.Errorf(fault.Forbidden, "only an administrator of the organisation deletes its triggers")
	}
	t, err := s.store.TriggerByName(ctx, org, project, name)
	if err != nil {
		return err
	}
	e := audit.Event{At: s.now().UTC(), Org: org, Actor: p.User.ID, Action: audit.TriggerDelete, Target: projectRef + "/" + name, Outcome: audit.OK}
	return s.store.DeleteTrigger(ctx, t.ID, e)
}

// Received is what a delivery came to, trigger by trigger.
type Received struct {
	Trigger  Trigger
	Delivery Delivery
	// Again says the delivery was recorded before: nothing new started.
	Again bool
}

// GitHub hands a GitHub App's delivery to every trigger on its
// repository that it matches.
func (s *Service) GitHub(ctx context.Context, e event.Event) ([]Received, error) {
	if s.forge == nil || s.forge.Kind() != "github" {
		return nil, fault.Errorf(fault.NotFound, "this deployment's forge is not GitHub")
	}
	repo := forge.Repo{Host: s.forge.Host(), Path: e.Repo}
	if r, ok := s.followUp(ctx, e, repo.String()); ok {
		return []Received{r}, nil
	}
	ts, err := s.store.TriggersOn(ctx, event.SourceGitHub, repo.String())
	if err != nil {
		return nil, err
	}
	var out []Received
	for _, t := range ts {
		d, ok := t.Matches(e)
		if !ok {
			continue
		}
		out = append(out, s.deliver(ctx, t, e, d))
	}
	return out, nil
}

// ByID is the trigger a per-trigger webhook's address names.
func (s *Service) ByID(ctx context.Context, id string) (Trigger, error) {
	if !strings.HasPrefix(id, "trg_") || len(id) > 40 {
		return Trigger{}, fault.Errorf(fault.NotFound, "no such trigger")
	}
	return s.store.GetTrigger(ctx, id)
}

// Deliver hands a verified delivery to t (a GitLab project webhook's or
// a generic webhook's, which name their trigger); none when t does not
// act on it.
func (s *Service) Deliver(ctx context.Context, t Trigger, e event.Event) ([]Received, error) {
	if t.On.Source == event.SourceGitLab {
		if s.forge == nil || s.forge.Kind() != "gitlab" {
			return nil, fault.Errorf(fault.NotFound, "this deployment's forge is not GitLab")
		}
		if got := (forge.Repo{Host: s.forge.Host(), Path: e.Repo}).String(); got != t.Repo {
			return nil, fault.Field("project", "the delivery is about %s, the trigger's repository is %s", got, t.Repo)
		}
		if r, ok := s.followUp(ctx, e, t.Repo); ok {
			return []Received{r}, nil
		}
	}
	d, ok := t.Matches(e)
	if !ok {
		return nil, nil
	}
	return []Received{s.deliver(ctx, t, e, d)}, nil
}

// deliver records the delivery once and starts its run unless a limit
// says no.
func (s *Service) deliver(ctx context.Context, t Trigger, e event.Event, data Data) Received {
	d := Delivery{Trigger: t.ID, ID: e.Delivery, At: s.now().UTC(), Thread: e.Thread, URL: e.URL}
	d, err := s.store.AddDelivery(ctx, d, func(live int) (Outcome, string) {
		if live >= t.Concurrency {
			return Skipped, fmt.Sprintf("concurrency limit: %d of its runs are live or starting, its limit is %d", live, t.Concurrency)
		}
		return "", ""
	})
	if err != nil {
		if errors.Is(err, fault.Conflict) {
			return Received{Trigger: t, Delivery: d, Again: true}
		}
		d.Outcome, d.Reason = Failed, "could not record the delivery: "+err.Error()
		return Received{Trigger: t, Delivery: d}
	}
	if d.Outcome == Skipped {
		if live, err := s.store.LiveRuns(ctx, t.ID); err == nil && len(live) > 0 {
			d.Reason += " (" + joinIDs(live) + ")"
		}
		s.log.InfoContext(ctx, "trigger delivery", "trigger", t.ID, "name", t.Name, "delivery", d.ID, "outcome", d.Outcome, "reason", d.Reason)
		return Received{Trigger: t, Delivery: d}
	}
	d.Outcome, d.Reason, d.Sandbox = s.start(ctx, t, e, data)
	if err := s.store.FinishDelivery(ctx, d); err != nil {
		s.log.ErrorContext(ctx, "could not record a delivery's outcome", "trigger", t.ID, "delivery", d.ID, "err", err)
	}
	s.log.InfoContext(ctx, "trigger delivery", "trigger", t.ID, "name", t.Name, "delivery", d.ID, "outcome", d.Outcome, "reason", d.Reason, "sandbox", d.Sandbox)
	return Received{Trigger: t, Delivery: d}
}

// start starts the delivery's run, or says why not.
func (s *Service) start(ctx context.Context, t Trigger, e event.Event, data Data) (Outcome, string, sandbox.ID) {
	if why, err := s.overBudget(ctx, t); err != nil {
		return Failed, "could not read today's spending: " + err.Error(), ""
	} else if why != "" {
		return Skipped, why, ""
	}
	owner, err := s.accounts.User(ctx, t.Owner)
	if err != nil {
		return Skipped, "its author " + t.Owner + " is gone: set it again", ""
	}
	if owner.Disabled {
		return Skipped, "its author " + owner.Name + " is disabled: set it again", ""
	}
	task, err := t.Render(data, s.cfg.MaxTask)
	if err != nil {
		return Failed, err.Error(), ""
	}
	req := sandbox.CreateRequest{
		Name: runName(t, e), Class: t.Class, Purpose: string(sandbox.PurposeAgent), Project: t.Project,
		Repo: s.address(t.Repo), Branch: t.Base, Task: task, Runner: t.Runner, Model: t.Model, Role: t.Role, Session: t.Session,
	}
	sb, err := s.boxes.Create(ctx, account.Principal{User: owner}, req)
	if err != nil {
		return Failed, err.Error(), ""
	}
	r := Report{Sandbox: sb.ID, Org: sb.Org, Repo: t.Repo, Base: t.Base, Trigger: t.ID, Thread: e.Thread, OpenPR: t.OpenPR && s.reporter != nil, Comment: s.reporter != nil && e.Thread.Number > 0}
	if r.OpenPR || r.Comment {
		if err := s.store.AddReport(ctx, r); err != nil {
			s.log.ErrorContext(ctx, "could not record a run's report", "sandbox", sb.ID, "err", err)
		}
	}
	return Started, "", sb.ID
}

// overBudget says how t's runs since midnight UTC are over its daily
// budget; "" when they are not.
func (s *Service) overBudget(ctx context.Context, t Trigger) (string, error) {
	if t.DailyTokens == 0 && t.DailyUSD == 0 {
		return "", nil
	}
	now := s.now().UTC()
	midnight := time.Date(now.Year(), now.Month(), now.Day(), 0, 0, 0, 0, time.UTC)
	ds, err := s.store.Deliveries(ctx, t.ID, midnight, 1000)
	if err != nil {
		return "", err
	}
	var ids []sandbox.ID
	for _, d := range ds {
		if d.Sandbox != "" {
			ids = append(ids, d.Sandbox)
		}
	}
	if len(ids) == 0 {
		return "", nil
	}
	if s.results == nil {
		return "", fmt.Errorf("runs' costs are not known here")
	}
	tokens, usd, err := s.results.Spent(ctx, ids)
	if err != nil {
		return "", err
	}
	switch {
	case t.DailyTokens > 0 && tokens >= t.DailyTokens:
		return fmt.Sprintf("daily budget: its %d runs today used %d tokens, its budget is %d", len(ids), tokens, t.DailyTokens), nil
	case t.DailyUSD > 0 && usd >= t.DailyUSD:
		return fmt.Sprintf("daily budget: its %d runs today cost $%.2f, its budget is $%.2f", len(ids), usd, t.DailyUSD), nil
	}
	return "", nil
}

func joinIDs(ids []sandbox.ID) string {
	var b strings.Builder
	for i, id := range ids {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(string(id))
	}
	return b.String()
}

// runName names a delivery's sandbox: the trigger's name, the thread's
// number, and a few random letters (one thread may start several).
func runName(t Trigger, e event.Event) string {
	suffix := strings.ToLower(rand.Text()[:5])
	n := t.Name
	if e.Thread.Number > 0 {
		n += fmt.Sprintf("-%d", e.Thread.Number)
	}
	if max := 40 - len(suffix) - 1; len(n) > max {
		n = strings.TrimRight(n[:max], "-")
	}
	return n + "-" + suffix
}

// Tick fires the schedules that are due: each once, by whichever replica
// moves its next firing first. A schedule that came due several times
// while no gateway ran fires once, for the latest, and goes on from now.
func (s *Service) Tick(ctx context.Context) error {
	now := s.now().UTC()
	due, err := s.store.DueSchedules(ctx, now, 50)
	if err != nil {
		return fmt.Errorf("due schedules: %w", err)
	}
	for _, t := range due {
		sched, err := schedule.Parse(t.On.Schedule)
		if err != nil {
			s.log.WarnContext(ctx, "a trigger's schedule no longer parses", "trigger", t.ID, "err", err)
			continue
		}
		next := sched.Next(now).UTC()
		if err := s.store.AdvanceSchedule(ctx, t.ID, t.NextAt, next); err != nil {
			continue // another replica fires it
		}
		// The latest firing due (bounded: a minute's schedule missed for a
		// week is ten thousand steps of well under a microsecond).
		latest := t.NextAt
		for range 20000 {
			n := sched.Next(latest)
			if n.IsZero() || n.After(now) {
				break
			}
			latest = n
		}
		at := latest.UTC().Format(time.RFC3339)
		e := event.Event{Source: event.SourceSchedule, Kind: event.KindSchedule, Delivery: "schedule-" + at, Repo: t.Repo}
		d, _ := t.Matches(e)
		d.Time = at
		s.deliver(ctx, t, e, d)
	}
	return nil
}
