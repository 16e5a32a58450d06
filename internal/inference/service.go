package inference

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"berth.dev/berth/internal/account"
	"berth.dev/berth/internal/audit"
	"berth.dev/berth/internal/fault"
	"berth.dev/berth/internal/runner"
)

// Store keeps inference settings and what every request used; the store
// package implements it.
type Store interface {
	// GetInferenceSettings returns an organisation's (project "") or a
	// project's settings as written; never written reads as the zero
	// Settings.
	GetInferenceSettings(ctx context.Context, org, project string) (Settings, error)
	// PutInferenceSettings writes them whole.
	PutInferenceSettings(ctx context.Context, org, project string, s Settings) error
	// RecordInference appends one request's record.
	RecordInference(ctx context.Context, r Record) error
	// InferenceSpend sums the cost charged to an organisation (project "":
	// all its projects) or a project since a time.
	InferenceSpend(ctx context.Context, org, project string, since time.Time) (float64, error)
	// SessionUsage sums the records of one session.
	SessionUsage(ctx context.Context, session string) (SessionUsage, error)
}

// Accounts is what the service needs of organisations and projects.
type Accounts interface {
	Organisation(ctx context.Context, p account.Principal, ref string) (account.Organisation, error)
	Project(ctx context.Context, org, ref string) (account.Project, error)
	DefaultProject(ctx context.Context, org string) (account.Project, error)
}

// AuditSet is the audit action of a change of inference settings.
const AuditSet = "inference.set"

// Record is one request as metered.
type Record struct {
	At       time.Time
	Org      string
	Project  string
	User     string
	Key      string
	Sandbox  string // the sandbox whose key it was; "" for a user's key
	Session  string // X-Berth-Session; "" when none was named
	Provider string
	Model    string // the model that answered (a router's target)
	Dialect  Dialect
	Status   int // the upstream's HTTP status; 0 when it never answered
	Usage    runner.Usage
	CostUSD  float64
	// Metered is false when a successful answer said no usage (a stream
	// cut short): the request was charged its reservation, its worst case.
	Metered bool
	// Lease is what the record takes off the leases of the replica that
	// admitted the request, in the transaction that writes it (lease.go);
	// zero on a gateway alone with its database.
	Lease Release
}

// SessionUsage is what the gateway metered for one session: an agent
// sandbox's run (its session is the sandbox's id).
type SessionUsage struct {
	Requests int
	Usage    runner.Usage
	CostUSD  float64
	// Models are the models that answered, in the order first used.
	Models []string
	// Unmetered counts successful answers that said no usage and were
	// charged their worst case.
	Unmetered int
}

// Options are what a Service is made of. Catalog, Store and Accounts are
// required.
type Options struct {
	Catalog  *Catalog
	Store    Store
	Accounts Accounts
	// Audit records settings changes; nil records nothing.
	Audit audit.Recorder
	// PublicURL is the gateway as a sandbox reaches it (BERTH_BASE_URL),
	// for the config files it renders.
	PublicURL string
	// Log reports a change that could not be audited; nil discards.
	Log *slog.Logger
	// Now is the clock; nil is time.Now.
	Now func() time.Time
	// Leases, when set, keeps the budgets in leases in the database, for
	// gateways that share it (PostgreSQL replicas): what they admit
	// together never passes a budget. Nil keeps reservations in this
	// process: exact for the one gateway of an SQLite file. With leases,
	// Run must run.
	Leases Leases
}

// Service decides and meters model requests.
type Service struct {
	catalog   *Catalog
	store     Store
	accounts  Accounts
	audit     audit.Recorder
	publicURL string
	log       *slog.Logger
	now       func() time.Time
	ledger    ledger
	limiter   *limiter

	mu       sync.Mutex
	policies map[policyKey]cachedPolicy
}

// policyKey names a key's scope: its organisation and the project its key
// names ("" for a user's key: the organisation's default project).
type policyKey struct{ org, project string }

type cachedPolicy struct {
	policy Policy
	at     time.Time
}

// policyTTL is how long a key's policy is reused. Every change of settings
// through this service drops the cache at once; the TTL bounds what it
// cannot see (a new default project).
const policyTTL = time.Second

// NewService returns a Service.
func NewService(o Options) *Service {
	if o.Audit == nil {
		o.Audit = audit.Discard{}
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	var l ledger = newLocal(o.Store.InferenceSpend)
	if o.Leases != nil {
		l = newShared(o.Leases)
	}
	return &Service{catalog: o.Catalog, store: o.Store, accounts: o.Accounts, audit: o.Audit, publicURL: o.PublicURL,
		log: o.Log, now: o.Now, ledger: l, limiter: newLimiter(), policies: map[policyKey]cachedPolicy{}}
}

// Run renews the budgets' leases (Options.Leases) a third of their life
// before they expire, until ctx is done; then it gives back what they
// hold beyond the requests in flight. Without leases it only waits.
func (s *Service) Run(ctx context.Context) {
	sh, ok := s.ledger.(*shared)
	if !ok {
		<-ctx.Done()
		return
	}
	tick := time.NewTicker(leaseTTL / 3)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			stop, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
			defer cancel()
			if err := sh.renew(stop, s.now(), true); err != nil {
				s.log.Warn("the budgets' leases were not given back; they expire in "+leaseTTL.String(), "err", err)
			}
			return
		case <-tick.C:
			if err := s.RenewLeases(ctx); err != nil {
				s.log.WarnContext(ctx, "budgets' leases", "err", err)
			}
		}
	}
}

// RenewLeases renews this gateway's leases of budgets: those unused since
// the last renewal give back their room first, or go when no request in
// flight holds them. Run calls it; without leases it does nothing.
func (s *Service) RenewLeases(ctx context.Context) error {
	if sh, ok := s.ledger.(*shared); ok {
		return sh.renew(ctx, s.now(), false)
	}
	return nil
}

// keyPolicy is Policy through a short cache: the model routes read it on
// every request.
func (s *Service) keyPolicy(ctx context.Context, p account.Principal) (Policy, error) {
	k, now := policyKey{p.User.Org, p.Project}, s.now()
	s.mu.Lock()
	c, ok := s.policies[k]
	s.mu.Unlock()
	if ok && now.Sub(c.at) < policyTTL && now.Sub(c.at) >= 0 {
		return c.policy, nil
	}
	pol, err := s.Policy(ctx, p)
	if err != nil {
		return Policy{}, err
	}
	s.mu.Lock()
	s.policies[k] = cachedPolicy{policy: pol, at: now}
	s.mu.Unlock()
	return pol, nil
}

// forget drops every cached policy, after a change of settings.
func (s *Service) forget() {
	s.mu.Lock()
	clear(s.policies)
	s.mu.Unlock()
}

// Catalog is the deployment's models and providers.
func (s *Service) Catalog() *Catalog { return s.catalog }

// scope is the organisation and project a key's inference belongs to: a
// sandbox's key its sandbox's project, a user's key the user's project
// (the one an administrator set, else the organisation's default).
func (s *Service) scope(ctx context.Context, p account.Principal) (account.Project, error) {
	if p.Project != "" {
		return s.accounts.Project(ctx, p.User.Org, p.Project)
	}
	if p.User.Project != "" {
		return s.accounts.Project(ctx, p.User.Org, p.User.Project)
	}
	return s.accounts.DefaultProject(ctx, p.User.Org)
}

// policy reads the organisation's and the project's settings.
func (s *Service) policy(ctx context.Context, org string, prj account.Project) (Policy, error) {
	og, err := s.store.GetInferenceSettings(ctx, org, "")
	if err != nil {
		return Policy{}, fmt.Errorf("inference settings of organisation %s: %w", org, err)
	}
	pg, err := s.store.GetInferenceSettings(ctx, org, prj.ID)
	if err != nil {
		return Policy{}, fmt.Errorf("inference settings of project %s: %w", prj.Name, err)
	}
	return newPolicy(s.catalog, org, prj.ID, prj.Name, og, pg), nil
}

// Policy returns what holds for a key.
func (s *Service) Policy(ctx context.Context, p account.Principal) (Policy, error) {
	prj, err := s.scope(ctx, p)
	if err != nil {
		return Policy{}, err
	}
	return s.policy(ctx, p.User.Org, prj)
}

// Models lists the models a key may reach, chat models first, routers
// after them.
func (s *Service) Models(ctx context.Context, p account.Principal) ([]Model, error) {
	pol, err := s.Policy(ctx, p)
	if err != nil {
		return nil, err
	}
	return pol.Reachable(), nil
}

// Ticket is an admitted request: where it goes, what is sent, and what it
// holds against its budgets until Settle.
type Ticket struct {
	Call     Call
	Model    Model    // the model that serves it: a router's target
	Provider Provider // where it goes
	// Body is what to send upstream.
	Body []byte

	rec   Record
	res   reservation
	worst float64
}

// Admit decides a request of key p: the model must be served and on both
// allow-lists, and the request must fit the rate limits and budgets. It
// returns the body to send upstream, with the system prompts and the
// upstream's model name in. session is the X-Berth-Session header: a
// sandbox's key may name only its own sandbox's session (another value
// that is no sandbox's is ignored), and a user's key none of a sandbox's
// (sbx_…).
func (s *Service) Admit(ctx context.Context, p account.Principal, call Call, body []byte, session string) (*Ticket, error) {
	if s.catalog.Empty() {
		return nil, fault.Errorf(fault.Unserved, "this gateway serves no models (BERTH_INFERENCE_FILE is unset or lists none)")
	}
	if err := checkSession(p, session); err != nil {
		return nil, err
	}
	pol, err := s.keyPolicy(ctx, p)
	if err != nil {
		return nil, err
	}
	prj := account.Project{ID: pol.Project, Name: pol.ProjectName}
	m, ok := s.catalog.Model(call.Model)
	if !ok {
		return nil, fault.Errorf(fault.NotFound, "model %q is not served by this gateway; this key may reach: %s", call.Model, names(pol.reachableIDs()))
	}
	if !pol.Allows(m.ID) {
		return nil, fault.Errorf(fault.Forbidden, "model %q is not allowed in project %s; this key may reach: %s", m.ID, prj.Name, names(pol.reachableIDs()))
	}
	target, ok := s.catalog.route(m, pol.Allows)
	if !ok {
		return nil, fault.Errorf(fault.Forbidden, "router %q reaches none of its models (%s) in project %s; this key may reach: %s",
			m.ID, names(m.Targets), prj.Name, names(pol.reachableIDs()))
	}
	prov, _ := s.catalog.Provider(target.Provider)
	if !prov.Kind.Speaks(call.Dialect) {
		var paths []string
		for _, d := range prov.Kind.Dialects() {
			paths = append(paths, d.Path())
		}
		return nil, fault.Errorf(fault.Invalid, "model %q is served by %s, which does not speak %s: call %s", target.ID, prov.Name, call.Dialect, strings.Join(paths, " or "))
	}
	now := s.now()
	t := &Ticket{Call: call, Model: target, Provider: prov, rec: Record{
		At: now, Org: p.User.Org, Project: prj.ID, User: p.User.ID, Key: p.KeyID, Sandbox: p.Sandbox, Session: sessionOf(p, session),
		Provider: prov.Name, Model: target.ID, Dialect: call.Dialect,
	}}
	system := pol.SystemPrompt()
	if !call.CountOnly {
		if err := s.limiter.take(pol.rates(), now); err != nil {
			return nil, err
		}
		t.worst = worstCase(call, target, s.catalog.maxOutput, len(system))
		if t.res, err = s.ledger.reserve(ctx, pol.limits(), t.worst, now); err != nil {
			return nil, err
		}
	}
	if t.Body, err = call.rewrite(body, target.Upstream, system); err != nil {
		s.ledger.settle(t.res, t.rec.Org, t.rec.Project, 0, false, now)
		return nil, err
	}
	return t, nil
}

// What a vendor adds to a prompt on its side, in tokens, for the worst
// case: a request that declares tools gets the vendor's tool-use system
// prompt (Anthropic's is 346 tokens), and each tool the vendor describes
// itself its own (Anthropic's text editor 700, computer use 735 plus a
// system prompt of up to 499).
const (
	toolUseOverhead = 512
	builtinOverhead = 1024
)

// worstCase is the most a request can cost (SPEC S14): its input at the
// dearest rate it can be charged, plus its output cap at the output rate,
// for each answer it asks for.
//
// Input: every byte of the body and of the system prompt added is a prompt
// token (no vendor's tokenizer makes more tokens than bytes, and the JSON
// around the text outweighs the vendor's framing of each message), plus
// the vendors' tool prompts; never more than the model's context window
// when the file names one. The rate is the input rate, or the cache-write
// rate when the request marks content for the cache (the only input
// charged above the input rate).
//
// Output: the request's own cap (max_tokens, max_completion_tokens,
// max_output_tokens, generationConfig.maxOutputTokens; reasoning and
// thinking count in it), never more than the model's maximum. A request
// that names no cap may get the model's maximum (max_tokens in the
// inference file), so that is reserved; for a model the file gives none,
// default_max_output_tokens (32000 unless set).
func worstCase(c Call, m Model, defaultMax, systemLen int) float64 {
	out := c.MaxOutput
	if out == 0 {
		out = m.MaxTokens
	}
	if out == 0 {
		out = defaultMax
	}
	if m.MaxTokens > 0 {
		// A vendor refuses a cap over the model's maximum.
		out = min(out, m.MaxTokens)
	}
	in := c.size + systemLen + c.builtin*builtinOverhead
	if c.tools > 0 {
		in += toolUseOverhead
	}
	if m.ContextWindow > 0 {
		in = min(in, m.ContextWindow)
	}
	p := m.Price
	rate := max(p.Input, p.CacheRead)
	if c.cacheWrite {
		rate = max(rate, p.CacheWrite)
	}
	return (float64(in)*rate + float64(out)*float64(max(c.choices, 1))*p.Output) / 1e6
}

// Settle ends an admitted request: status is the upstream's answer (0 when
// none came), meter what it read of the answer (nil when nothing). It
// prices the metered tokens, records the request for its session and
// releases the reservation, charging the real cost. A successful answer
// that said no usage is charged its worst case. The record is returned
// even when storing it failed.
func (s *Service) Settle(ctx context.Context, t *Ticket, status int, meter *Meter) (Record, error) {
	r := t.rec
	r.Status = status
	if meter != nil {
		r.Usage, r.Metered = meter.Usage()
	}
	switch {
	case status/100 != 2 || t.Call.CountOnly:
		// Vendors charge neither errors nor token counts.
		r.Usage, r.CostUSD, r.Metered = runner.Usage{}, 0, true
	case r.Metered:
		r.CostUSD, _ = runner.Prices{r.Model: t.Model.Price}.Cost(r.Model, r.Usage)
	default:
		r.CostUSD = t.worst
	}
	// Recorded before the ledger counts it: a month read from the store
	// in between then counts it twice, never not at all. The record takes
	// the reservation off the replica's lease as it commits.
	r.Lease = s.ledger.release(t.res)
	err := s.store.RecordInference(ctx, r)
	s.ledger.settle(t.res, r.Org, r.Project, r.CostUSD, err == nil, s.now())
	if err != nil {
		return r, fmt.Errorf("record inference of %s: %w", r.Model, err)
	}
	return r, nil
}

// Usage returns what the gateway metered for a session (an agent
// sandbox's id): requests, tokens, cost and the models that answered. A
// session with no request is the zero SessionUsage. The agent-run code
// shows it beside the tokens the agent reported.
func (s *Service) Usage(ctx context.Context, session string) (SessionUsage, error) {
	u, err := s.store.SessionUsage(ctx, session)
	if err != nil {
		return SessionUsage{}, fmt.Errorf("usage of session %s: %w", session, err)
	}
	return u, nil
}

// sessionOf is the session a request is recorded under. A sandbox's
// sessions are its own id: another value that is no sandbox's (an
// engineer sandbox's Pi sends the name of its unset BERTH_SESSION) is
// ignored; checkSession has refused another sandbox's.
func sessionOf(p account.Principal, session string) string {
	if p.Sandbox != "" && session != p.Sandbox {
		return ""
	}
	return session
}

// checkSession refuses a session a key may not name.
func checkSession(p account.Principal, session string) error {
	switch {
	case session == "":
		return nil
	case len(session) > 128 || strings.ContainsFunc(session, func(r rune) bool { return r < 0x21 || r > 0x7e }):
		return fault.Errorf(fault.Invalid, "X-Berth-Session: at most 128 printable characters")
	case p.Sandbox != "" && session != p.Sandbox && strings.HasPrefix(session, "sbx_"):
		return fault.Errorf(fault.Forbidden, "X-Berth-Session: a sandbox's key names only its own session (%s)", p.Sandbox)
	case p.Sandbox == "" && strings.HasPrefix(session, "sbx_"):
		return fault.Errorf(fault.Forbidden, "X-Berth-Session: sbx_ sessions are sandboxes' own; a user's key names another")
	}
	return nil
}
