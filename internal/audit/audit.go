// Package audit is berth's append-only record of who did what (SPEC S17):
// every sandbox state change, credential issued or revoked, shell opened,
// push accepted or refused, class and guardrail change. It is a table, not a
// log level: entries are written in the store and read by administrators
// (their organisation's) and operators (all). An entry never holds a
// secret: keys and tokens are named by id, never by value.
package audit

import (
	"context"
	"log/slog"
	"time"
)

// Actions, named "<thing>.<verb>".
const (
	SandboxCreate = "sandbox.create"
	SandboxState  = "sandbox.state" // a state change; Detail says from → to and why
	SandboxExtend = "sandbox.extend"
	SandboxTask   = "sandbox.task" // a session given its next task; Detail its size, never its text

	// SandboxCheckpoint is a suspend's save of the machine's memory (or
	// its failure, the machine then stopped); SandboxRestore a resume's
	// restore of it, or the cold start it fell back to, and why.
	SandboxCheckpoint = "sandbox.checkpoint"
	SandboxRestore    = "sandbox.restore"

	// SandboxFork is a fork (SPEC S3): on the source, the forks it was
	// copied into and the save's size; on each fork, its source.
	SandboxFork = "sandbox.fork"

	KeyCreate        = "key.create"
	KeyRevoke        = "key.revoke"
	CredentialIssue  = "credential.issue"  // a repository token or similar handed to a sandbox
	CredentialRevoke = "credential.revoke" // one taken back
	ShellOpen        = "shell.open"        // a tunnel connection; Detail says how long and how many bytes
	EgressRefuse     = "egress.refuse"     // the egress proxy refused a sandbox a host; Target host:port, Detail why
	EgressLearn      = "egress.learn"      // a learning sandbox's egress was frozen to what it reached; Target the list, Detail why then
	SecretSet        = "secret.set"        // a project's secret stored (its value never in the log); Target project/NAME, Detail its hosts
	SecretDelete     = "secret.delete"
	GitPush          = "git.push" // Outcome ok or refused; Target the repository, Detail the refs
	GitFetch         = "git.fetch"
	ClassApply       = "class.apply"
	ClassDelete      = "class.delete"
	GuardrailSet     = "guardrail.set"
	AgentConfigSet   = "agent_config.set" // an organisation's or project's agent configuration written; Detail its size and effort, never its text
	TriggerSet       = "trigger.set"      // a project's trigger written; Target project/NAME, Detail what starts it and its limits
	TriggerDelete    = "trigger.delete"
	OrgCreate        = "org.create"
	ProjectCreate    = "project.create"
	UserCreate       = "user.create"
	UserProject      = "user.project"      // Target the user; Detail the project their new sandboxes and keys land in
	InvitationCreate = "invitation.create" // Target the user; Detail the invitation's id and expiry
	InvitationRedeem = "invitation.redeem" // Target the invitation; Detail the client address, and why when refused
	UserDisable      = "user.disable"      // Target the user; Detail who or what disabled them and why
	UserEnable       = "user.enable"       // Target the user
	UserRole         = "user.role"         // Target the user; Detail from → to and why (the identity provider's groups)
	UserLink         = "user.link"         // Target the user; Detail the identity provider's issuer and subject now theirs
	SSOSignIn        = "sso.sign_in"       // Target the user (or the subject when refused); Detail panel or cli, and why when refused
	SSORefresh       = "sso.refresh"       // a sign-in's session refreshed at the identity provider; logged when refused
	SSOSignOut       = "sso.sign_out"      // a sign-in's session ended (signed out, or its key revoked)
	SSOMapping       = "sso.mapping"       // Target the organisation; Detail the groups of its members and administrators
)

// Outcomes.
const (
	OK      = "ok"
	Refused = "refused"
)

// Event is one entry.
type Event struct {
	ID      int64     // assigned by the store, increasing
	At      time.Time // when it happened
	Org     string    // the organisation it concerns; "" for the deployment
	Actor   string    // the user id who did it; "" for berth itself (the sweep)
	Sandbox string    // the sandbox it concerns, if any
	Action  string
	Target  string // what was acted on: a key id, a class name, a repository…
	Outcome string // OK or Refused
	Detail  string // in words; never a secret value
}

// Recorder appends events. Services take one; the store implements it.
type Recorder interface {
	Record(ctx context.Context, e Event) error
}

// Record writes an event that has no write of its own to share a
// transaction with (a shell's connection, a push, a refusal), stamped with
// now when it has no time. What it records has already happened, so a
// failure is logged, not returned.
func Record(ctx context.Context, r Recorder, log *slog.Logger, now func() time.Time, e Event) {
	if e.At.IsZero() {
		e.At = now()
	}
	if err := r.Record(ctx, e); err != nil {
		log.ErrorContext(ctx, "audit event not recorded", "action", e.Action, "sandbox", e.Sandbox, "err", err)
	}
}

// Filter narrows a read. Zero fields do not narrow.
type Filter struct {
	Org     string
	Sandbox string
	Since   time.Time
	Newest  bool // newest first; oldest first otherwise
}

// Discard is a Recorder that keeps nothing, for tests that do not look.
type Discard struct{}

// Record does nothing.
func (Discard) Record(context.Context, Event) error { return nil }
