package account

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"berth.dev/berth/internal/audit"
	"berth.dev/berth/internal/fault"
	"berth.dev/berth/internal/paging"
	"berth.dev/berth/internal/secret"
)

// Store is what the account service needs from the database. Lookups by
// "ref" accept an id or a name. Names are unique: organisations across the
// deployment, projects and users within their organisation.
type Store interface {
	// Bootstrap writes the first organisation, project, operator and key in
	// one transaction, failing with fault.Conflict when any organisation exists.
	// Every write below that takes events appends them to the audit log in
	// the transaction of its change (SPEC S17: the log never misses one).
	Bootstrap(ctx context.Context, org Organisation, project Project, user User, key Key, events ...audit.Event) error
	CreateOrganisation(ctx context.Context, org Organisation, project Project, events ...audit.Event) error
	GetOrganisation(ctx context.Context, ref string) (Organisation, error)
	// The lists read a page (paging.Request) and return the key of its last
	// entry when more follow, oldest first.
	ListOrganisations(ctx context.Context, pg paging.Request) ([]Organisation, *paging.Key, error)
	CreateProject(ctx context.Context, p Project, events ...audit.Event) error
	GetProject(ctx context.Context, org, ref string) (Project, error)
	// ListProjects returns org's projects, oldest (the default) first.
	ListProjects(ctx context.Context, org string, pg paging.Request) ([]Project, *paging.Key, error)
	CreateUser(ctx context.Context, u User, events ...audit.Event) error
	GetUser(ctx context.Context, id string) (User, error)
	FindUser(ctx context.Context, org, ref string) (User, error)
	ListUsers(ctx context.Context, org string, pg paging.Request) ([]User, *paging.Key, error)
	// SetUserDisabled disables (or enables) a user, with its events;
	// byIdP says the identity provider's refusal is why (User.DisabledByIdP).
	SetUserDisabled(ctx context.Context, id string, disabled, byIdP bool, events ...audit.Event) error
	// SetUserProject sets the project (id; "": the oldest) a user's new
	// sandboxes and keys land in.
	SetUserProject(ctx context.Context, id, project string, events ...audit.Event) error
	CreateKey(ctx context.Context, k Key, events ...audit.Event) error
	GetKey(ctx context.Context, id string) (Key, error)
	ListKeys(ctx context.Context, user string, pg paging.Request) ([]Key, *paging.Key, error)
	// RevokeKey records events only when it revokes a live key.
	RevokeKey(ctx context.Context, id string, at time.Time, events ...audit.Event) error
	// CreateInvitation writes inv and marks the user's earlier unused
	// invitations replaced at inv.CreatedAt, in one transaction. Unless inv
	// is a recovery invitation, a user who has ever had a key is
	// fault.Conflict (checked in that transaction).
	CreateInvitation(ctx context.Context, inv Invitation, events ...audit.Event) error
	GetInvitation(ctx context.Context, id string) (Invitation, error)
	// RedeemInvitation marks invitation id used at at from the address
	// from and writes k, in one transaction, if the invitation is still
	// usable then: not used, not replaced, not expired, and (unless it is
	// a recovery invitation) its user has never had a key. Otherwise it is
	// fault.Conflict and nothing is written.
	RedeemInvitation(ctx context.Context, id string, at time.Time, from string, k Key, events ...audit.Event) error
}

// Service manages organisations, projects, users and keys, and
// authenticates callers. Every change it makes is recorded in the audit
// log (SPEC S17).
type Service struct {
	store      Store
	guardrails GuardrailStore
	now        func() time.Time
	seed       func(ctx context.Context, org string) error
	audit      audit.Recorder
	log        *slog.Logger
}

// NewService returns a Service. seed, when not nil, is called for every new
// organisation, so it starts with the template's classes (SPEC S4). rec
// records what the service changes; nil records nothing. log is where a
// failure to record is reported; nil discards it.
func NewService(store Store, guardrails GuardrailStore, now func() time.Time, seed func(ctx context.Context, org string) error,
	rec audit.Recorder, log *slog.Logger) *Service {
	if rec == nil {
		rec = audit.Discard{}
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Service{store: store, guardrails: guardrails, now: now, seed: seed, audit: rec, log: log}
}

// record appends an audit event stamped now, on its own: for refusals,
// which change nothing. Every change records its events in the
// transaction that makes it (the store's writes take them). A failure to
// record is logged, not returned.
func (s *Service) record(ctx context.Context, e audit.Event) {
	if e.At.IsZero() {
		e.At = s.now()
	}
	if err := s.audit.Record(ctx, e); err != nil {
		s.log.ErrorContext(ctx, "audit event not recorded", "action", e.Action, "org", e.Org, "err", err)
	}
}

// Bootstrap creates the first organisation, its project and an operator, and
// mints the operator's key. It works only on an empty deployment.
func (s *Service) Bootstrap(ctx context.Context, orgName, projectName, userName string) (Organisation, Project, User, NewKeyResult, error) {
	if err := CheckName("organisation", orgName); err != nil {
		return Organisation{}, Project{}, User{}, NewKeyResult{}, err
	}
	if err := CheckName("project", projectName); err != nil {
		return Organisation{}, Project{}, User{}, NewKeyResult{}, err
	}
	if err := CheckUserName(userName); err != nil {
		return Organisation{}, Project{}, User{}, NewKeyResult{}, err
	}
	now := s.now()
	org := Organisation{ID: NewID("org"), Name: orgName, CreatedAt: now}
	prj := Project{ID: NewID("prj"), Org: org.ID, Name: projectName, CreatedAt: now}
	usr := User{ID: NewID("usr"), Org: org.ID, Name: userName, Role: RoleOperator, CreatedAt: now}
	key, secret := NewKey(usr.ID, "bootstrap", now)
	// Nobody is signed in yet: berth itself (actor "") makes these, at the
	// request of whoever runs `berth admin bootstrap` on the gateway's host.
	events := []audit.Event{
		{Action: audit.OrgCreate, Target: org.Name, Detail: "bootstrap: " + org.ID},
		{Action: audit.ProjectCreate, Target: prj.Name, Detail: "bootstrap: " + prj.ID},
		{Action: audit.UserCreate, Target: usr.Name, Detail: "bootstrap: " + usr.ID + ", operator"},
		{Action: audit.KeyCreate, Target: key.ID, Detail: "bootstrap: the key of " + usr.Name},
	}
	for i := range events {
		events[i].At, events[i].Org = now, org.ID
	}
	if err := s.store.Bootstrap(ctx, org, prj, usr, key, events...); err != nil {
		if errors.Is(err, fault.Conflict) {
			return Organisation{}, Project{}, User{}, NewKeyResult{}, fault.Errorf(fault.Conflict, "bootstrap: the deployment already has an organisation")
		}
		return Organisation{}, Project{}, User{}, NewKeyResult{}, fmt.Errorf("bootstrap: %w", err)
	}
	if err := s.seedOrg(ctx, org.ID); err != nil {
		return Organisation{}, Project{}, User{}, NewKeyResult{}, err
	}
	return org, prj, usr, NewKeyResult{Key: key, Secret: secret}, nil
}

// NewKeyResult is a key just minted and its secret, shown once.
type NewKeyResult struct {
	Key    Key
	Secret secret.Secret
}

// Authenticate finds the caller a presented secret belongs to. Every way it
// can fail is fault.Unauthenticated, so a caller learns nothing about keys.
func (s *Service) Authenticate(ctx context.Context, token string) (Principal, error) {
	id, secret, ok := ParseSecret(token)
	if !ok {
		return Principal{}, fault.Errorf(fault.Unauthenticated, "not a berth key")
	}
	k, err := s.store.GetKey(ctx, id)
	if errors.Is(err, fault.NotFound) || (err == nil && (!k.Matches(secret) || !k.Live(s.now()))) {
		return Principal{}, fault.Errorf(fault.Unauthenticated, "unknown, revoked or expired key")
	}
	if err != nil {
		return Principal{}, fmt.Errorf("authenticate: %w", err)
	}
	p, err := s.holder(ctx, k)
	if err != nil {
		return Principal{}, fmt.Errorf("authenticate: %w", err)
	}
	return p, nil
}

// holder is the principal of a live key k: its user, unless disabled.
func (s *Service) holder(ctx context.Context, k Key) (Principal, error) {
	u, err := s.store.GetUser(ctx, k.User)
	if err != nil {
		return Principal{}, fmt.Errorf("key %s: %w", k.ID, err)
	}
	if u.Disabled {
		return Principal{}, fault.Errorf(fault.Unauthenticated, "the key's user is disabled")
	}
	return Principal{User: u, KeyID: k.ID, Sandbox: k.Sandbox, Project: k.Project}, nil
}

// CreateOrganisation creates an organisation and its default project.
// Operators only.
func (s *Service) CreateOrganisation(ctx context.Context, p Principal, name, project string) (Organisation, Project, error) {
	if !p.IsOperator() {
		return Organisation{}, Project{}, fault.Errorf(fault.Forbidden, "create organisation: only an operator may")
	}
	if project == "" {
		project = "default"
	}
	if err := CheckName("name", name); err != nil {
		return Organisation{}, Project{}, err
	}
	if err := CheckName("project", project); err != nil {
		return Organisation{}, Project{}, err
	}
	now := s.now()
	org := Organisation{ID: NewID("org"), Name: name, CreatedAt: now}
	prj := Project{ID: NewID("prj"), Org: org.ID, Name: project, CreatedAt: now}
	if err := s.store.CreateOrganisation(ctx, org, prj,
		audit.Event{At: now, Org: org.ID, Actor: p.User.ID, Action: audit.OrgCreate, Target: org.Name, Detail: org.ID},
		audit.Event{At: now, Org: org.ID, Actor: p.User.ID, Action: audit.ProjectCreate, Target: prj.Name, Detail: prj.ID + ", the default"},
	); err != nil {
		return Organisation{}, Project{}, fmt.Errorf("create organisation: %w", err)
	}
	if err := s.seedOrg(ctx, org.ID); err != nil {
		return Organisation{}, Project{}, err
	}
	return org, prj, nil
}

func (s *Service) seedOrg(ctx context.Context, org string) error {
	if s.seed == nil {
		return nil
	}
	if err := s.seed(ctx, org); err != nil {
		return fmt.Errorf("seed classes of organisation %s: %w", org, err)
	}
	return nil
}

// Organisations lists a page of what p may see, oldest first: every
// organisation for an operator, otherwise p's own.
func (s *Service) Organisations(ctx context.Context, p Principal, pg paging.Request) ([]Organisation, *paging.Key, error) {
	if p.IsOperator() {
		return s.store.ListOrganisations(ctx, pg)
	}
	if pg.After != nil { // the one organisation was the first page
		return nil, nil, nil
	}
	org, err := s.store.GetOrganisation(ctx, p.User.Org)
	if err != nil {
		return nil, nil, err
	}
	return []Organisation{org}, nil, nil
}

// Organisation finds an organisation p belongs to (or any, for an
// operator). An empty ref means p's own. Others are not found.
func (s *Service) Organisation(ctx context.Context, p Principal, ref string) (Organisation, error) {
	if ref == "" {
		ref = p.User.Org
	}
	org, err := s.store.GetOrganisation(ctx, ref)
	if err != nil {
		return Organisation{}, err // the store names the organisation
	}
	if !p.InOrg(org.ID) {
		return Organisation{}, fault.Errorf(fault.NotFound, "organisation %s", ref)
	}
	return org, nil
}

// CreateProject adds a project to an organisation p administers.
func (s *Service) CreateProject(ctx context.Context, p Principal, orgRef, name string) (Project, error) {
	org, err := s.Organisation(ctx, p, orgRef)
	if err != nil {
		return Project{}, err
	}
	if !p.IsAdminOf(org.ID) {
		return Project{}, fault.Errorf(fault.Forbidden, "create project: only an administrator of %s may", org.Name)
	}
	if err := CheckName("name", name); err != nil {
		return Project{}, err
	}
	prj := Project{ID: NewID("prj"), Org: org.ID, Name: name, CreatedAt: s.now()}
	e := audit.Event{At: prj.CreatedAt, Org: org.ID, Actor: p.User.ID, Action: audit.ProjectCreate, Target: prj.Name, Detail: prj.ID}
	if err := s.store.CreateProject(ctx, prj, e); err != nil {
		return Project{}, fmt.Errorf("create project: %w", err)
	}
	return prj, nil
}

// Projects lists a page of an organisation's projects, oldest first: the
// first page's first is the default.
func (s *Service) Projects(ctx context.Context, p Principal, orgRef string, pg paging.Request) ([]Project, *paging.Key, error) {
	org, err := s.Organisation(ctx, p, orgRef)
	if err != nil {
		return nil, nil, err
	}
	return s.store.ListProjects(ctx, org.ID, pg)
}

// Project finds one of an organisation's projects by id or name. A project
// of another organisation is not found, even when its id exists (SPEC S6).
func (s *Service) Project(ctx context.Context, org, ref string) (Project, error) {
	prj, err := s.store.GetProject(ctx, org, ref)
	if err != nil {
		return Project{}, err // the store names the project
	}
	if prj.Org != org {
		return Project{}, fault.Errorf(fault.NotFound, "project %s", ref)
	}
	return prj, nil
}

// DefaultProject returns an organisation's oldest project.
func (s *Service) DefaultProject(ctx context.Context, org string) (Project, error) {
	prjs, _, err := s.store.ListProjects(ctx, org, paging.Request{Limit: 1})
	if err != nil {
		return Project{}, err
	}
	if len(prjs) == 0 {
		return Project{}, fault.Errorf(fault.NotFound, "organisation %s has no project", org)
	}
	return prjs[0], nil
}

// CreateUser adds a user to an organisation p administers. Only an operator
// may make another operator.
func (s *Service) CreateUser(ctx context.Context, p Principal, orgRef, name, email string, role Role) (User, error) {
	org, err := s.Organisation(ctx, p, orgRef)
	if err != nil {
		return User{}, err
	}
	if !p.IsAdminOf(org.ID) {
		return User{}, fault.Errorf(fault.Forbidden, "create user: only an administrator of %s may", org.Name)
	}
	if role == RoleOperator && !p.IsOperator() {
		return User{}, fault.Errorf(fault.Forbidden, "create user: only an operator may make an operator")
	}
	if err := CheckUserName(name); err != nil {
		return User{}, err
	}
	if err := CheckText("email", email, MaxEmail); err != nil {
		return User{}, err
	}
	u := User{ID: NewID("usr"), Org: org.ID, Name: name, Email: email, Role: role, CreatedAt: s.now()}
	e := audit.Event{At: u.CreatedAt, Org: org.ID, Actor: p.User.ID, Action: audit.UserCreate, Target: u.Name, Detail: u.ID + ", " + string(u.Role)}
	if err := s.store.CreateUser(ctx, u, e); err != nil {
		return User{}, fmt.Errorf("create user: %w", err)
	}
	return u, nil
}

// Users lists a page of an organisation's users, oldest first.
func (s *Service) Users(ctx context.Context, p Principal, orgRef string, pg paging.Request) ([]User, *paging.Key, error) {
	org, err := s.Organisation(ctx, p, orgRef)
	if err != nil {
		return nil, nil, err
	}
	return s.store.ListUsers(ctx, org.ID, pg)
}

// User returns a user by id, for display.
func (s *Service) User(ctx context.Context, id string) (User, error) {
	return s.store.GetUser(ctx, id)
}

// keyUser resolves ref (empty: p itself) to a user whose keys p may list
// and revoke (Principal.CanHandleKeysOf). Anyone else is not found, not
// forbidden: an operator's keys do not exist for an administrator.
func (s *Service) keyUser(ctx context.Context, p Principal, ref string) (User, error) {
	if ref == "" || ref == p.User.ID || ref == p.User.Name {
		return p.User, nil
	}
	u, err := s.store.FindUser(ctx, p.User.Org, ref)
	if errors.Is(err, fault.NotFound) && p.IsOperator() {
		u, err = s.store.GetUser(ctx, ref)
	}
	if err != nil {
		return User{}, err // the store names the user
	}
	if !p.CanHandleKeysOf(u) {
		return User{}, fault.Errorf(fault.NotFound, "user %s", ref)
	}
	return u, nil
}

// CreateKey mints a key for a user (empty: p). Its secret is shown once.
// Only the user themselves and operators mint a user's keys
// (Principal.CanMintKeyFor); an administrator invites a new user instead.
func (s *Service) CreateKey(ctx context.Context, p Principal, userRef, name string) (NewKeyResult, error) {
	if err := CheckText("name", name, MaxKeyName); err != nil {
		return NewKeyResult{}, err
	}
	u, err := s.keyUser(ctx, p, userRef)
	if err != nil {
		return NewKeyResult{}, err
	}
	if !p.CanMintKeyFor(u) {
		return NewKeyResult{}, fault.Errorf(fault.Forbidden, "create key: a key of %s is theirs alone: only %s or an operator mints one "+
			"(a user who has never signed in gets an invitation: berth user invite %s)", u.Name, u.Name, u.Name)
	}
	k, secret := NewKey(u.ID, name, s.now())
	e := audit.Event{At: k.CreatedAt, Org: u.Org, Actor: p.User.ID, Action: audit.KeyCreate, Target: k.ID, Detail: keyDetail(u, k)}
	if err := s.store.CreateKey(ctx, k, e); err != nil {
		return NewKeyResult{}, fmt.Errorf("create key: %w", err)
	}
	return NewKeyResult{Key: k, Secret: secret}, nil
}

// Keys lists a page of a user's keys (empty: p's), oldest first, without
// secrets.
func (s *Service) Keys(ctx context.Context, p Principal, userRef string, pg paging.Request) ([]Key, *paging.Key, error) {
	u, err := s.keyUser(ctx, p, userRef)
	if err != nil {
		return nil, nil, err
	}
	return s.store.ListKeys(ctx, u.ID, pg)
}

// RevokeKey ends a key at once. p may revoke their own keys and, as an
// administrator, those of their organisation's members and administrators
// (Principal.CanHandleKeysOf); an operator's key is not found.
func (s *Service) RevokeKey(ctx context.Context, p Principal, id string) error {
	k, err := s.store.GetKey(ctx, id)
	if err != nil {
		return fmt.Errorf("revoke: %w", err)
	}
	u, err := s.store.GetUser(ctx, k.User)
	if err != nil {
		return fmt.Errorf("revoke: %w", err)
	}
	if !p.CanHandleKeysOf(u) {
		return fault.Errorf(fault.NotFound, "revoke: key %s", id)
	}
	// Revoking a revoked key changes nothing, and records nothing.
	now := s.now()
	e := audit.Event{At: now, Org: u.Org, Actor: p.User.ID, Sandbox: k.Sandbox, Action: audit.KeyRevoke, Target: k.ID, Detail: keyDetail(u, k)}
	if err := s.store.RevokeKey(ctx, id, now, e); err != nil {
		return fmt.Errorf("revoke: %w", err)
	}
	return nil
}

// SetDisabled disables (or enables again) a user of an organisation p
// administers. A disabled user's keys, their sandboxes' own included, stop
// working at once; the caller also ends the user's sandboxes. Nobody may
// disable themselves, and only an operator may disable an operator.
func (s *Service) SetDisabled(ctx context.Context, p Principal, orgRef, userRef string, disabled bool) (User, error) {
	org, err := s.Organisation(ctx, p, orgRef)
	if err != nil {
		return User{}, err
	}
	if !p.IsAdminOf(org.ID) {
		return User{}, fault.Errorf(fault.Forbidden, "disable user: only an administrator of %s may", org.Name)
	}
	u, err := s.store.FindUser(ctx, org.ID, userRef)
	if err != nil {
		return User{}, err
	}
	switch {
	case u.ID == p.User.ID:
		return User{}, fault.Errorf(fault.Forbidden, "disable user: you cannot disable yourself")
	case u.Role == RoleOperator && !p.IsOperator():
		return User{}, fault.Errorf(fault.Forbidden, "disable user: only an operator may disable an operator")
	}
	e := audit.Event{At: s.now(), Org: org.ID, Actor: p.User.ID, Action: audit.UserEnable, Target: u.Name, Detail: u.ID}
	if disabled {
		e.Action, e.Detail = audit.UserDisable, u.ID+", by "+p.User.Name
	}
	if err := s.store.SetUserDisabled(ctx, u.ID, disabled, false, e); err != nil {
		return User{}, fmt.Errorf("disable user: %w", err)
	}
	u.Disabled, u.DisabledByIdP = disabled, false
	return u, nil
}

// keyDetail words whose key k is, for the audit log.
func keyDetail(owner User, k Key) string {
	if k.Sandbox != "" {
		return "the key of sandbox " + k.Sandbox
	}
	d := "a key of " + owner.Name
	if k.Name != "" {
		d += " named " + k.Name
	}
	return d
}

// Principal is whoever holds the key id now, as Authenticate would find
// them without its secret: for a credential the gateway minted from that
// key (an HTTP preview's cookie), so that a revoked or expired key, or a
// disabled user, ends it. Every way it fails is fault.Unauthenticated.
func (s *Service) Principal(ctx context.Context, keyID string) (Principal, error) {
	k, err := s.store.GetKey(ctx, keyID)
	if errors.Is(err, fault.NotFound) || (err == nil && !k.Live(s.now())) {
		return Principal{}, fault.Errorf(fault.Unauthenticated, "the key this was opened with is revoked or expired")
	}
	if err != nil {
		return Principal{}, fmt.Errorf("key %s: %w", keyID, err)
	}
	return s.holder(ctx, k)
}
