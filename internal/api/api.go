// Package api holds the JSON wire types of the gateway's HTTP API and its
// error codes. The gateway writes them and the client reads them; both
// sides share this package so a field renamed on one side is renamed on the
// other. It imports nothing from this module.
package api

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"
)

// Error codes. The gateway's one error mapper chooses them; the client maps
// them back to errors a caller can test with errors.As.
const (
	CodeInvalid         = "invalid"           // 400: bad input; Field names it
	CodeUnauthenticated = "unauthenticated"   // 401: no key, or a key that is unknown, revoked or expired
	CodeForbidden       = "forbidden"         // 403: the caller may see the thing but not do this
	CodeQuotaExceeded   = "quota_exceeded"    // 403: a guardrail refuses the request (SPEC S7)
	CodeNotFound        = "not_found"         // 404: absent, or not the caller's to see (SPEC S6)
	CodeConflict        = "conflict"          // 409: the state does not allow it, or the name is taken
	CodeAmbiguous       = "ambiguous"         // 409: a name matches several sandboxes; IDs lists them
	CodeUnavailable     = "unavailable"       // 409: the deployment cannot do this (no driver, unmapped tier, no forge)
	CodeNoGitCredential = "no_git_credential" // 409: the forge gave no token (SPEC S9)
	CodeUpgradeRequired = "upgrade_required"  // 426: the tunnel's Upgrade header was stripped (SPEC S10)
	CodeTooLarge        = "too_large"         // 413: the request's body is over its route's limit (a model route: its vendor's shape); Field is "body"
	CodeRateLimited     = "rate_limited"      // 429
	CodeBudgetExceeded  = "budget_exceeded"   // 402: a request does not fit what is left of an inference budget (SPEC S14)
	CodeUpstream        = "upstream"          // 502: the model vendor could not be reached
	CodeBusy            = "busy"              // 503: the gateway could not take the request in time and wrote nothing of it; send it again after Retry-After
	CodeInternal        = "internal"          // 500: details are in the gateway's log, not here
)

// MaxBody is the most a request body may hold unless its route says
// otherwise (the OpenAPI description gives such a route's limit as
// x-berth-body-limit). A body over its route's limit is refused whole with
// 413 too_large naming the field "body" and the limit, on every route that
// reads one and on the web panel's forms.
const MaxBody = 1 << 20

// Every list route answers one page at a time. Its query takes limit, the
// most entries the page holds (DefaultLimit when not given; from 1 to
// MaxLimit, else 400 invalid naming limit), and cursor, where the page
// starts. An answer that is not the list's last page carries a Link
// header (RFC 8288) whose rel="next" target is the next page's path with
// its cursor: opaque, good for the caller's key and that list only, and
// holding the list's filters (a filter sent with it must be the same or
// left out). A bad cursor is 400 invalid naming cursor.
const (
	DefaultLimit = 100
	MaxLimit     = 1000
)

// Error is the body of every non-2xx answer.
type Error struct {
	// Status is the HTTP status the error came with. It is not sent; the
	// client fills it in from the response.
	Status  int      `json:"-"`
	Code    string   `json:"code"`
	Message string   `json:"message"`
	Field   string   `json:"field,omitempty"` // the input field at fault, for CodeInvalid
	IDs     []string `json:"ids,omitempty"`   // the candidates, for CodeAmbiguous
}

// Error returns the message with its code, as a CLI prints it.
func (e *Error) Error() string {
	msg := e.Message
	if len(e.IDs) > 0 {
		msg += " (" + strings.Join(e.IDs, ", ") + ")"
	}
	return fmt.Sprintf("%s: %s", e.Code, msg)
}

// Health is the answer of GET /healthz.
type Health struct {
	Status  string `json:"status"`
	Version string `json:"version"`
	Commit  string `json:"commit,omitempty"` // the commit the gateway was built from, when its build says
	Driver  string `json:"driver"`           // "" when the deployment has no sandboxes
}

// Bootstrap is what `berth admin bootstrap` prints: the first organisation,
// project and operator, and the operator's key, shown once.
type Bootstrap struct {
	Organisation Organisation `json:"organisation"`
	Project      Project      `json:"project"`
	User         User         `json:"user"`
	Key          NewKey       `json:"key"`
}

// Whoami describes the caller.
type Whoami struct {
	User         User         `json:"user"`
	Organisation Organisation `json:"organisation"`
	KeyID        string       `json:"key_id"`
	Sandbox      string       `json:"sandbox,omitempty"` // set for a sandbox's own key
}

// Organisation is a tenant: it owns projects, users and classes.
type Organisation struct {
	ID        string    `json:"id"`
	Name      string    `json:"name"`
	CreatedAt time.Time `json:"created_at"`
}

// CreateOrganisation is the body of POST /api/v1/orgs. Project names the
// organisation's first (default) project; empty means "default".
type CreateOrganisation struct {
	Name    string `json:"name"`
	Project string `json:"project,omitempty"`
}

// Project groups sandboxes under one guardrail. The oldest project of an
// organisation is its default.
type Project struct {
	ID           string    `json:"id"`
	Organisation string    `json:"organisation"`
	Name         string    `json:"name"`
	Default      bool      `json:"default"`
	CreatedAt    time.Time `json:"created_at"`
}

// CreateProject is the body of POST /api/v1/orgs/{org}/projects.
type CreateProject struct {
	Name string `json:"name"`
}

// User is a person or a system with keys. Role is operator, admin or member.
type User struct {
	ID           string `json:"id"`
	Organisation string `json:"organisation"`
	Name         string `json:"name"`
	Email        string `json:"email,omitempty"`
	Role         string `json:"role"`
	Disabled     bool   `json:"disabled,omitempty"`
	// DisabledByIdP is set when berth disabled the user because the
	// identity provider no longer lets them in; a sign-in it allows again
	// enables them.
	DisabledByIdP bool `json:"disabled_by_idp,omitempty"`
	// Issuer and Subject name the person at the identity provider, once
	// they signed in through it.
	Issuer  string `json:"issuer,omitempty"`
	Subject string `json:"subject,omitempty"`
	// Project is the id of the project the user's new sandboxes and keys
	// land in, when an administrator set one; absent: the organisation's
	// oldest.
	Project   string    `json:"project,omitempty"`
	CreatedAt time.Time `json:"created_at"`
}

// DisabledUser answers a disable: the user, and how many of their
// sandboxes were ended or stopped.
type DisabledUser struct {
	User      User `json:"user"`
	Sandboxes int  `json:"sandboxes"`
}

// SetUserProject is the body of PUT /api/v1/orgs/{org}/users/{user}/project.
type SetUserProject struct {
	Project string `json:"project"` // a project's name or id
}

// CreateUser is the body of POST /api/v1/orgs/{org}/users.
type CreateUser struct {
	Name  string `json:"name"`
	Email string `json:"email,omitempty"`
	Role  string `json:"role"`
}

// Key describes an API key without its secret.
type Key struct {
	ID        string     `json:"id"`
	User      string     `json:"user"`
	Name      string     `json:"name"`
	Sandbox   string     `json:"sandbox,omitempty"`
	CreatedAt time.Time  `json:"created_at"`
	ExpiresAt *time.Time `json:"expires_at,omitempty"`
	RevokedAt *time.Time `json:"revoked_at,omitempty"`
}

// CreateKey is the body of POST /api/v1/keys. User is a user id or name in
// the caller's organisation; empty means the caller.
type CreateKey struct {
	User string `json:"user,omitempty"`
	Name string `json:"name,omitempty"`
}

// NewKey is a key just minted: the only time its secret is ever shown.
type NewKey struct {
	Key
	Secret string `json:"secret"`
}

// CreateInvitation is the body of POST
// /api/v1/orgs/{org}/users/{user}/invitation. TTL is how long it may wait
// to be used, such as "24h" or "3d"; empty means 72h, at most 7d.
type CreateInvitation struct {
	TTL string `json:"ttl,omitempty"`
}

// Invitation is a one-time invitation just issued: the only time its
// secret is shown. Its user exchanges it for their own key at
// InvitationRedeemPath (`berth login --invitation`). Recovery is set for
// an operator's, which a user who already has keys may use.
type Invitation struct {
	ID        string    `json:"id"`
	User      User      `json:"user"`
	Recovery  bool      `json:"recovery,omitempty"`
	CreatedAt time.Time `json:"created_at"`
	ExpiresAt time.Time `json:"expires_at"`
	Secret    string    `json:"secret"`
}

// InvitationRedeemPath is the public route an invitation is exchanged at
// for a key: the invitation is the credential.
const InvitationRedeemPath = "/api/v1/invitations/redeem"

// RedeemInvitation is the body of POST InvitationRedeemPath. KeyName names
// the key it gives; empty means "enrolled".
type RedeemInvitation struct {
	Invitation string `json:"invitation"`
	KeyName    string `json:"key_name,omitempty"`
}

// Enrollment answers a redeemed invitation: who the key is for, and the
// key, its secret shown this once.
type Enrollment struct {
	User         User         `json:"user"`
	Organisation Organisation `json:"organisation"`
	Key          NewKey       `json:"key"`
}

// SSOPath says whether the gateway signs people in through an identity
// provider (public: the CLI asks before berth login --sso).
const SSOPath = "/api/v1/sso"

// SSO answers GET SSOPath.
type SSO struct {
	// Enabled is true when the gateway has an identity provider.
	Enabled bool `json:"enabled"`
	// Issuer is the provider's issuer URL.
	Issuer string `json:"issuer,omitempty"`
	// KeySignIn is false when the panel takes no API key to sign in
	// (BERTH_PANEL_KEY_SIGNIN=off): people sign in through the provider.
	KeySignIn bool `json:"key_sign_in"`
	// CLIStart is the page berth login --sso opens in a browser, with
	// port, challenge, state and (optionally) org in its query.
	CLIStart string `json:"cli_start,omitempty"`
}

// SSOTokenPath is the public route where berth login --sso trades the
// one-time code its loopback listener was handed for a key: the code and
// the PKCE verifier only the CLI holds are the credential.
const SSOTokenPath = "/api/v1/sso/token"

// SSOToken is the body of POST SSOTokenPath. KeyName names the key it
// gives; empty means "sso".
type SSOToken struct {
	Code     string `json:"code"`
	Verifier string `json:"verifier"`
	KeyName  string `json:"key_name,omitempty"`
}

// SSODevicePath begins berth login --sso --device (public): a device
// authorization grant (RFC 8628's flow), played by the gateway, for a CLI
// no browser can reach; SSODeviceTokenPath is where it polls.
const (
	SSODevicePath      = "/api/v1/sso/device"
	SSODeviceTokenPath = "/api/v1/sso/device/token"
)

// StartSSODevice is the body of POST SSODevicePath: the key's name (empty
// means "sso") and the organisation to sign in to (empty: the one the
// person's groups give).
type StartSSODevice struct {
	KeyName string `json:"key_name,omitempty"`
	Org     string `json:"org,omitempty"`
}

// SSODevice answers POST SSODevicePath: the person opens VerificationURI
// and types UserCode (or opens VerificationURIComplete), while the CLI
// polls SSODeviceTokenPath with DeviceCode every Interval seconds.
type SSODevice struct {
	DeviceCode              string `json:"device_code"`
	UserCode                string `json:"user_code"`
	VerificationURI         string `json:"verification_uri"`
	VerificationURIComplete string `json:"verification_uri_complete"`
	ExpiresIn               int    `json:"expires_in"`
	Interval                int    `json:"interval"`
}

// PollSSODevice is the body of POST SSODeviceTokenPath.
type PollSSODevice struct {
	DeviceCode string `json:"device_code"`
}

// CodePending answers a poll of a device grant nobody has signed in for
// yet (409): poll again after the interval. A poll too soon is 429
// (CodeRateLimited) with Retry-After.
const CodePending = "authorization_pending"

// SSOMapping is an organisation's rule for people who sign in through the
// identity provider (GET and PUT /api/v1/orgs/{org}/sso): the groups whose
// people are its members, and its administrators. A person in none of
// them is not let in to the organisation. Operators are the deployment's
// own setting (BERTH_OIDC_OPERATOR_GROUPS), never a mapping's.
type SSOMapping struct {
	Members        []string `json:"members"`
	Administrators []string `json:"administrators"`
}

// Guardrail is a set of quota fields (SPEC S7). A nil field sets no limit;
// AllowedRepos nil means "not set" (on an organisation: no repository).
type Guardrail struct {
	MaxSandboxes     *int     `json:"max_sandboxes"`
	MaxSandboxMemory *Memory  `json:"max_sandbox_memory"` // as classes write memory: "32Gi"
	MaxSandboxCPU    *string  `json:"max_sandbox_cpu"`    // cores, as "4" or "4000m"
	MaxSandboxTTL    *string  `json:"max_sandbox_ttl"`    // a duration such as "8h" or "7d"
	AllowedRepos     []string `json:"allowed_repos"`
	// Egress narrows agent sandboxes' egress, restrict-only: ["none"],
	// ["open"] or hosts; nil narrows nothing.
	Egress []string `json:"egress"`
}

// Memory is an amount of memory as classes write it ("32Gi", "512Mi"),
// which is how the gateway prints it. It also reads a JSON number, which is
// MiB, as the API took guardrails' memory before it took units.
type Memory string

// UnmarshalJSON reads a string, or a number of MiB.
func (m *Memory) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err == nil {
		*m = Memory(s)
		return nil
	}
	var n json.Number
	if err := json.Unmarshal(b, &n); err != nil {
		// Only a guardrail's max_sandbox_memory is a Memory.
		return fmt.Errorf("max_sandbox_memory: %s is not an amount of memory (a string such as \"32Gi\", or a number of MiB)", b)
	}
	*m = Memory(n.String())
	return nil
}

// Class is a named machine shape (SPEC S4), in the form people write it in
// the sandboxes file and `berth sandbox apply -f`.
type Class struct {
	Name        string   `json:"name" yaml:"name"`
	Description string   `json:"description,omitempty" yaml:"description,omitempty"`
	Image       string   `json:"image" yaml:"image"`
	Isolation   string   `json:"isolation,omitempty" yaml:"isolation,omitempty"`
	CPU         string   `json:"cpu,omitempty" yaml:"cpu,omitempty"`
	Memory      string   `json:"memory,omitempty" yaml:"memory,omitempty"`
	Disk        string   `json:"disk,omitempty" yaml:"disk,omitempty"`
	DefaultTTL  string   `json:"default_ttl,omitempty" yaml:"default_ttl,omitempty"`
	MaxTTL      string   `json:"max_ttl,omitempty" yaml:"max_ttl,omitempty"`
	Warm        int      `json:"warm,omitempty" yaml:"warm,omitempty"`
	Purposes    []string `json:"purposes,omitempty" yaml:"purposes,omitempty"`
	// Git is how its sandboxes reach the repository: gateway (default) or
	// token (SPEC S9).
	Git string `json:"git,omitempty" yaml:"git,omitempty"`
	// Contract is the interface its agent image implements: berth (SPEC
	// S13) or kelos (S13.6); SetupCommand a kelos image's setup command.
	Contract     string   `json:"contract,omitempty" yaml:"contract,omitempty"`
	SetupCommand []string `json:"setup_command,omitempty" yaml:"setup_command,omitempty"`
	// Runner is what its agent sandboxes run when their creator names
	// none; empty: the deployment's default (BERTH_AGENT_RUNNER).
	Runner string `json:"runner,omitempty" yaml:"runner,omitempty"`
	// Ports are the ports its engineer sandboxes serve, to forward.
	Ports []int `json:"ports,omitempty" yaml:"ports,omitempty"`
	// Egress is where its agent sandboxes may go out to through the
	// gateway's proxy: ["none"], ["open"] or hosts; unset: none for an
	// agent, an open network for an engineer.
	Egress []string `json:"egress,omitempty" yaml:"egress,omitempty"`
	// SessionIdle is how long its sessions wait suspended for their next
	// task before they end, such as "2h"; empty: until their lifetime
	// ends. Only agent sessions use it.
	SessionIdle string `json:"session_idle,omitempty" yaml:"session_idle,omitempty"`
}

// ClassFile is the YAML document of BERTH_SANDBOXES_FILE and of
// `berth sandbox apply -f`.
type ClassFile struct {
	Sandboxes []Class `json:"sandboxes" yaml:"sandboxes"`
}

// ClassStatus is a class as `berth sandbox classes` lists it: the class with
// its defaults filled in, and whether the caller could start one now in the
// default project.
type ClassStatus struct {
	Class
	Startable bool   `json:"startable"`
	Reason    string `json:"reason,omitempty"` // why not, when not startable
}

// ApplyClasses is the body of PUT /sandbox/v1/classes.
type ApplyClasses struct {
	Organisation string  `json:"organisation,omitempty"` // operators only; empty means the caller's
	Classes      []Class `json:"classes"`
}

// AppliedClasses answers an apply: what was written, and what will not work yet.
type AppliedClasses struct {
	Created  []string `json:"created"`
	Updated  []string `json:"updated"`
	Warnings []string `json:"warnings,omitempty"`
}

// Sandbox is one sandbox as the API shows it.
type Sandbox struct {
	ID           string `json:"id"`
	Name         string `json:"name"`
	Organisation string `json:"organisation"`
	Project      string `json:"project"`
	Owner        string `json:"owner"`      // user id
	OwnerName    string `json:"owner_name"` // user name
	Purpose      string `json:"purpose"`
	Class        string `json:"class"`
	Image        string `json:"image"`
	Isolation    string `json:"isolation"`
	CPU          string `json:"cpu"`
	Memory       string `json:"memory"`
	Disk         string `json:"disk,omitempty"`
	State        State  `json:"state"`
	Reason       string `json:"reason,omitempty"`
	// Stage says how far a starting sandbox's start has got (queued,
	// checkout, machine) and StageSince when it got there; absent when the
	// replica answering does not run the start.
	Stage      string            `json:"stage,omitempty"`
	StageSince *time.Time        `json:"stage_since,omitempty"`
	Repo       string            `json:"repo,omitempty"`
	Branch     string            `json:"branch,omitempty"`
	Runner     string            `json:"runner,omitempty"`
	Role       string            `json:"role,omitempty"`     // an agent sandbox's: author or reviewer
	Contract   string            `json:"contract,omitempty"` // an agent sandbox's image contract: berth or kelos
	Env        map[string]string `json:"env,omitempty"`
	// FromPool says the sandbox was taken from its class's warm pool
	// (SPEC S12).
	FromPool bool `json:"from_pool,omitempty"`
	// Session says the agent sandbox stays after each task, suspended,
	// for the next (POST …/tasks); Run is then its latest run.
	Session bool `json:"session,omitempty"`
	// Egress is where it may go out to through the gateway's proxy:
	// "none", "open", or hosts joined by ", ".
	Egress string `json:"egress,omitempty"`
	// Suspend says how an engineer sandbox is suspended: SuspendMemory
	// (its memory and processes saved, and restored at resume: the
	// isolated tier on podman) or SuspendStop (its machine stopped, its
	// volume kept). CheckpointBytes is the size of a suspended sandbox's
	// saved memory; absent when it has none.
	Suspend         string `json:"suspend,omitempty"`
	CheckpointBytes int64  `json:"checkpoint_bytes,omitempty"`
	// ForkedFrom is the id of the sandbox this one is a fork of; absent
	// for one made by a create.
	ForkedFrom string `json:"forked_from,omitempty"`
	// Compare are the ids of the agent sandboxes whose work a reviewer
	// compares; absent for any other sandbox.
	Compare   []string   `json:"compare,omitempty"`
	CreatedAt time.Time  `json:"created_at"`
	ExpiresAt time.Time  `json:"expires_at"`
	EndedAt   *time.Time `json:"ended_at,omitempty"`
	// LifetimeCut is on the answer of a create or an extend whose lifetime
	// was cut to a maximum: what it was cut to, and whose maximum ("ttl 5d
	// is cut to 8h, the class's max_ttl"). Absent otherwise.
	LifetimeCut string `json:"lifetime_cut,omitempty"`
	// RunningSeconds is the sum of the sandbox's running segments (SPEC S8).
	RunningSeconds int64 `json:"running_seconds"`
	// Connections is how many connections through the gateway's tunnel
	// are open to the sandbox now, and LastActivity when one last opened,
	// closed or carried bytes; nil when the gateway has seen none since it
	// started. Idle suspend counts from it (SPEC S3).
	Connections  int        `json:"connections"`
	LastActivity *time.Time `json:"last_activity,omitempty"`
	// Run is an agent sandbox's run; absent for an engineer sandbox and
	// for an agent sandbox whose run has not been recorded.
	Run *Run `json:"run,omitempty"`
}

// How an engineer sandbox is suspended (Sandbox.Suspend).
const (
	SuspendMemory = "memory" // its processes go on where they were at resume
	SuspendStop   = "stop"   // its machine stops; its volume is kept
)

// State is where a sandbox is in its life (SPEC S3). Compare a sandbox's
// state with these, never with a string of its own.
type State string

// The states of SPEC S3.
const (
	StateStarting   State = "starting"
	StateRunning    State = "running"
	StateSuspended  State = "suspended"
	StateExpired    State = "expired"
	StateFailed     State = "failed"
	StateTerminated State = "terminated"
)

// RunState is how an agent run goes (SPEC S13).
type RunState string

// The states of a run.
const (
	RunRunning   RunState = "running"
	RunSucceeded RunState = "succeeded"
	RunFailed    RunState = "failed"
)

// Run is one agent execution in an agent sandbox (SPEC S2, S13): the
// runner, how it went, what it pushed, and its telemetry as the agent's
// CLI reported it. While the run goes, the telemetry is what has been read
// so far.
type Run struct {
	// Seq numbers the sandbox's runs from 1 (a session's tasks), and Task
	// is the task this run was given.
	Seq    int    `json:"seq"`
	Task   string `json:"task,omitempty"`
	Runner string `json:"runner"`
	// Model is the model that ran: the one the CLI's stream names, else the
	// one the run was started on.
	Model string   `json:"model"`
	State RunState `json:"state"`
	// ExitCode is the agent's exit code (its machine's); nil while the
	// run goes, and for a run that never exited: its sandbox was ended
	// under it (Ended), or its machine never started or vanished.
	ExitCode *int `json:"exit_code"`
	// Ended says how a run ended that did not exit: the state its sandbox
	// was moved to under it, terminated or failed. EndedBy names who did
	// it: a user (EndedByID is their id), or "berth" for berth itself
	// (the sweep, at the sandbox's expiry; a machine that never started
	// or vanished). Both are empty for a run that exited or still goes.
	Ended     State  `json:"ended,omitempty"`
	EndedBy   string `json:"ended_by,omitempty"`
	EndedByID string `json:"ended_by_id,omitempty"`
	Error     string `json:"error,omitempty"`  // why it failed, when it did
	Branch    string `json:"branch,omitempty"` // the branch its work was pushed to
	Commit    string `json:"commit,omitempty"` // and the commit; empty when it committed nothing
	// Usage is the run's tokens as the agent reported them.
	Usage Tokens `json:"usage"`
	// CostUSD is the run's cost in US dollars as the agent reported it (or
	// berth priced its tokens); nil when it is unknown (not zero:
	// unknown). CostSource says where it comes from: native (the CLI's
	// own figure), computed (tokens by the price table) or unknown.
	// PriceBasis is what the CLI says it priced at, when it says.
	CostUSD    *float64 `json:"cost_usd"`
	CostSource string   `json:"cost_source"`
	PriceBasis string   `json:"price_basis,omitempty"`
	SessionID  string   `json:"session_id,omitempty"` // the CLI's own session id
	// Turns counts model calls as the CLI reports them; 0 when it does not
	// say.
	Turns int `json:"turns"`
	// Lines is how many lines the agent wrote on stdout, and IgnoredLines
	// how many of them were not in its runner's vocabulary.
	Lines        int        `json:"lines"`
	IgnoredLines int        `json:"ignored_lines"`
	StartedAt    time.Time  `json:"started_at"`
	EndedAt      *time.Time `json:"ended_at,omitempty"`
	// Metered is what the gateway itself metered of the run's model calls
	// (its session): authoritative where the agent's own figures are not,
	// and its cost is what budgets are charged. Nil when the deployment
	// serves no inference.
	Metered *Metered `json:"metered,omitempty"`
	// Review is a reviewer run's outcome (SPEC S13.5); nil for an author's.
	Review *Review `json:"review,omitempty"`
	// Outputs are the lines a kelos image printed between its output
	// markers, and Results those of the form "key: value" (SPEC S13.6).
	Outputs []string          `json:"outputs,omitempty"`
	Results map[string]string `json:"results,omitempty"`
	// Difference says how the agent's tokens or cost differ from the
	// gateway's, once the run is over, and why when berth can tell; nil
	// when they agree.
	Difference *Difference `json:"difference,omitempty"`
	// MachineCostUSD is the sandbox's machine time (its running time by
	// its cores) at the deployment's price per core-hour, and TotalCostUSD
	// the run's cost in one number: the gateway's metered model cost (the
	// agent's own figure without inference) and the machine together.
	// Both are absent when the deployment prices no machine time.
	MachineCostUSD *float64 `json:"machine_cost_usd,omitempty"`
	TotalCostUSD   *float64 `json:"total_cost_usd,omitempty"`
	// EgressRefused lists the hosts (host, or host:port when not 443)
	// the egress proxy refused the run's sandbox, as a pull request of
	// its work should say: what the agent wanted and did not get.
	EgressRefused []string `json:"egress_refused,omitempty"`
}

// SandboxEgress is where a sandbox went out to through the gateway's
// egress proxy (GET /sandbox/v1/sandboxes/{ref}/egress/hosts): each host, port
// and decision with its connections and bytes.
type SandboxEgress struct {
	Sandbox string `json:"sandbox"` // its id
	Name    string `json:"name"`
	// Policy is its egress, as Sandbox.Egress says it.
	Policy string       `json:"policy"`
	Hosts  []EgressHost `json:"hosts"`
	// Learned is the hosts it reached by name, as a class's egress: lists
	// them (berth sandbox egress --as-policy); ["none"] when it reached
	// none.
	Learned []string `json:"learned"`
}

// EgressHost is what a sandbox's connections to one host and port came
// to, allowed or refused.
type EgressHost struct {
	Host        string    `json:"host"`
	Port        int       `json:"port"`
	Decision    string    `json:"decision"` // allowed or refused
	Connections int64     `json:"connections"`
	BytesUp     int64     `json:"bytes_up"`   // to the host
	BytesDown   int64     `json:"bytes_down"` // from the host
	First       time.Time `json:"first"`
	Last        time.Time `json:"last"`
	Why         string    `json:"why,omitempty"` // a refusal's reason
}

// Difference is how a finished run's own figures differ from what the
// gateway metered. Tokens are compared exactly; costs agree within
// rounding: a millionth of a dollar or a hundredth of a percent.
type Difference struct {
	Tokens  bool   `json:"tokens"` // the token counts differ
	Cost    bool   `json:"cost"`   // the costs differ beyond rounding
	Summary string `json:"summary"`
	// Causes say where it comes from; empty when berth cannot tell.
	Causes []Cause `json:"causes"`
}

// Cause is one known source of a run's difference.
type Cause struct {
	// Kind is uncounted_calls (calls the agent made but does not count in
	// its totals), unmetered_calls (answers that said no usage, charged
	// their worst case), price_table (the same tokens priced at other
	// rates) or unreported (the agent's output said no tokens).
	Kind    string `json:"kind"`
	Message string `json:"message"`
	// Requests, Usage and CostUSD are the calls it is about, for the kinds
	// about calls.
	Requests int      `json:"requests,omitempty"`
	Usage    *Tokens  `json:"usage,omitempty"`
	CostUSD  *float64 `json:"cost_usd,omitempty"`
}

// Review is what the host made of a reviewer run's verdict: approved,
// changes_requested, or held for a human (missing, unreadable, or the run
// did not end cleanly: never approved by default).
type Review struct {
	Outcome string `json:"outcome"`
	Summary string `json:"summary,omitempty"`
	SHA256  string `json:"sha256,omitempty"` // of the host's copy of the verdict
	Reason  string `json:"reason,omitempty"` // why it is held
	File    string `json:"file,omitempty"`   // where the verdict was found, in the checkout
	// Best is the attempt a reviewer that compares several named best:
	// one of the compared sandboxes' names.
	Best string `json:"best,omitempty"`
}

// Metered is the gateway's count of a session's model calls. Unmetered
// counts answers that said no usage, charged their worst case.
type Metered struct {
	Requests  int      `json:"requests"`
	Usage     Tokens   `json:"usage"`
	CostUSD   float64  `json:"cost_usd"`
	Models    []string `json:"models,omitempty"`
	Unmetered int      `json:"unmetered,omitempty"`
}

// Tokens is a run's token usage, counted the same way for every runner:
// Input excludes the cached tokens, which CacheRead and CacheWrite count,
// and Output includes Reasoning.
type Tokens struct {
	Input      int64 `json:"input"`
	Output     int64 `json:"output"`
	CacheRead  int64 `json:"cache_read"`
	CacheWrite int64 `json:"cache_write"`
	Reasoning  int64 `json:"reasoning"`
}

// CreatePreview is the body of POST /sandbox/v1/sandboxes/{ref}/previews:
// the sandbox's port to open in a browser.
type CreatePreview struct {
	Port int `json:"port"`
}

// Preview is an HTTP preview of a sandbox's port: URL opens it once,
// before ExpiresAt, on the preview's own origin (it carries a one-time
// token the preview trades for a cookie of its own).
type Preview struct {
	URL       string    `json:"url"`
	ExpiresAt time.Time `json:"expires_at"`
}

// CreateSandbox is the body of POST /sandbox/v1/sandboxes.
type CreateSandbox struct {
	Name    string            `json:"name"`
	Class   string            `json:"class,omitempty"`
	Purpose string            `json:"purpose,omitempty"` // engineer (default) or agent
	Project string            `json:"project,omitempty"` // administrators only; id or name
	TTL     string            `json:"ttl,omitempty"`     // a duration; empty means the class's default
	Repo    string            `json:"repo,omitempty"`
	Branch  string            `json:"branch,omitempty"`
	Task    string            `json:"task,omitempty"`
	Runner  string            `json:"runner,omitempty"`
	Model   string            `json:"model,omitempty"`    // agent sandboxes: the model the run starts on; default one its runner speaks
	Role    string            `json:"role,omitempty"`     // agent sandboxes: author (default) or reviewer
	SSHKeys []string          `json:"ssh_keys,omitempty"` // authorized_keys lines
	Env     map[string]string `json:"env,omitempty"`
	// Egress narrows an agent sandbox's egress, restrict-only, as its
	// guardrails do: ["none"], ["learn"] (within an open class) or hosts.
	Egress []string `json:"egress,omitempty"`
	// OpenPR opens a draft pull (merge) request from berth/<name> after a
	// clean author run (agent sandboxes on a forge that takes them).
	OpenPR bool `json:"open_pr,omitempty"`
	// Session keeps an agent sandbox after each task, suspended, for the
	// next one (POST /sandbox/v1/sandboxes/{ref}/tasks).
	Session bool `json:"session,omitempty"`
	// Compare names 2 to 8 agent sandboxes (names or ids) whose pushed
	// work a reviewer (role reviewer) compares: best of N, its verdict
	// naming the best (Review.Best).
	Compare []string `json:"compare,omitempty"`
}

// GiveTask is the body of POST /sandbox/v1/sandboxes/{ref}/tasks: a
// session's next task.
type GiveTask struct {
	Task string `json:"task"`
}

// Fork is the body of POST /sandbox/v1/sandboxes/{ref}/fork: copy a
// running engineer sandbox (the isolated tier) into Count new ones that go
// on from its memory and a copy of its volume, or an agent's session
// waiting between tasks into Count sessions that each run Task as the
// next task of its conversation, on a copy of its checkout, pushing to
// their own branches. The answer is a SandboxList of the forks, starting.
type Fork struct {
	Name string `json:"name"` // the fork's name; with Count > 1 the forks are Name-1 … Name-Count
	// Count is how many forks, 1 to 8; 0 is 1.
	Count int `json:"count,omitempty"`
	// Task is what each fork of a session does (required there; an
	// engineer sandbox's fork takes none): a create's limits.
	Task string `json:"task,omitempty"`
}

// Runs is the answer of GET /sandbox/v1/sandboxes/{ref}/run/all: an agent
// sandbox's runs, oldest first (a session's tasks, one run each).
type Runs struct {
	Runs []Run `json:"runs"`
}

// Extend is the body of POST /sandbox/v1/sandboxes/{ref}/extend.
type Extend struct {
	TTL string `json:"ttl,omitempty"` // from now; empty means the class's default
	// NoShorten refuses (409 conflict) an extend whose new expiry is
	// sooner than the sandbox's current one; nothing changes then.
	NoShorten bool `json:"no_shorten,omitempty"`
}

// SandboxList is the answer of GET /sandbox/v1/sandboxes.
type SandboxList struct {
	Sandboxes []Sandbox `json:"sandboxes"`
}

// GitCredential is a repository token for a sandbox in token mode (SPEC S9),
// the answer of POST /sandbox/v1/git-credential.
type GitCredential struct {
	Username  string    `json:"username"`
	Token     string    `json:"token"`
	ExpiresAt time.Time `json:"expires_at"`
}

// Environment is a warm pool sandbox's environment (SPEC S12, S15), the
// answer of POST /sandbox/v1/bootstrap to its one-time token.
type Environment struct {
	Env map[string]string `json:"env"`
}

// BootstrapPath is the route a pool's sandbox fetches its environment at.
const BootstrapPath = "/sandbox/v1/bootstrap"

// GitHubHookPath is where a GitHub App's webhook posts (issue 23); a
// GitLab or generic webhook posts to its trigger's hook_url.
const GitHubHookPath = "/hooks/v1/github"

// The routes of an in-machine agent run (SPEC S13 on Kubernetes), called
// with its sandbox's own key: its task (text), its output (a stream of
// lines, each "o " and a line of the agent's stdout or "e " and one of its
// stderr; sent whole again after a break), and its exit (RunExit).
const (
	RunTaskPath   = "/sandbox/v1/run/task"
	RunOutputPath = "/sandbox/v1/run/output"
	RunExitPath   = "/sandbox/v1/run/exit"
)

// The headers of a run's diff (GET /sandbox/v1/sandboxes/{ref}/run/diff):
// the branch and commit the run pushed (none when it pushed nothing), and,
// when the diff was cut, the bytes it stops at.
const (
	DiffBranchHeader = "Berth-Branch"
	DiffCommitHeader = "Berth-Commit"
	DiffCutHeader    = "Berth-Diff-Cut"
)

// MaxBundle is the most work, in bytes, an in-machine run hands the
// gateway in its RunExit's bundle.
const MaxBundle = 64 << 20

// RunExit is what an in-machine run reports, once, when its agent exited:
// its exit code; after a clean exit its work, a git bundle of the commits
// on its clone's commit whose one ref is Commit (base64 in JSON, at most
// 64 MiB; "" and none when it made no commit), which the gateway makes
// berth/<name> once it has concluded the run clean; why it could not hand
// its work over; and the verdict file it found in its checkout (SPEC
// S13.5; base64, at most 64 KiB) with where it was, or why it took none.
type RunExit struct {
	ExitCode     int    `json:"exit_code"`
	Commit       string `json:"commit,omitempty"`
	Bundle       []byte `json:"bundle,omitempty"`
	Error        string `json:"error,omitempty"`
	Verdict      []byte `json:"verdict,omitempty"`
	VerdictFile  string `json:"verdict_file,omitempty"`
	VerdictError string `json:"verdict_error,omitempty"`
}

// UsageReport is the answer of GET /sandbox/v1/usage (SPEC S8): the
// sandboxes created since Since, grouped by project, user or class, with
// what their model calls cost.
type UsageReport struct {
	By           string     `json:"by"`                     // project, user or class
	Organisation string     `json:"organisation,omitempty"` // the organisation's id; empty: every organisation
	Since        time.Time  `json:"since"`
	Until        time.Time  `json:"until"`
	Rows         []UsageRow `json:"rows"`
	Total        UsageRow   `json:"total"`
}

// UsageRow is one group's usage: the sandboxes created in the window
// (each counts whole there), how many of them are live now, the sum of
// their running segments and that time by their cores.
type UsageRow struct {
	Organisation     string  `json:"organisation,omitempty"`
	OrganisationName string  `json:"organisation_name,omitempty"`
	ID               string  `json:"id,omitempty"` // the project's or user's id, or the class's name
	Name             string  `json:"name,omitempty"`
	Sandboxes        int     `json:"sandboxes"`
	Live             int     `json:"live"`
	RunningSeconds   int64   `json:"running_seconds"`
	CoreSeconds      float64 `json:"core_seconds"`
	// Requests, Tokens and ModelCostUSD are what the gateway metered of
	// those sandboxes' model calls, at the models' prices.
	Requests     int     `json:"requests"`
	Tokens       Tokens  `json:"tokens"`
	ModelCostUSD float64 `json:"model_cost_usd"`
	// MachineCostUSD is the machine time at the deployment's price per
	// core-hour, and CostUSD the two together: the cost in one number.
	// Both are absent when the deployment prices no machine time.
	MachineCostUSD *float64 `json:"machine_cost_usd,omitempty"`
	CostUSD        *float64 `json:"cost_usd,omitempty"`
}

// AuditEvent is one entry of the audit log (SPEC S17). It never holds a
// secret: keys and tokens are named by id.
type AuditEvent struct {
	ID           int64     `json:"id"`
	At           time.Time `json:"at"`
	Organisation string    `json:"organisation,omitempty"`
	Actor        string    `json:"actor,omitempty"`      // a user id; empty: berth itself (the sweep)
	ActorName    string    `json:"actor_name,omitempty"` // that user's name
	Sandbox      string    `json:"sandbox,omitempty"`
	Action       string    `json:"action"` // such as sandbox.state or key.create
	Target       string    `json:"target,omitempty"`
	Outcome      string    `json:"outcome"` // ok or refused
	Detail       string    `json:"detail,omitempty"`
}

// AuditLog is the answer of GET /api/v1/audit, oldest first.
type AuditLog struct {
	Events []AuditEvent `json:"events"`
}

// InferenceSettings are an organisation's or a project's inference rules
// (SPEC S14), the body of PUT …/inference: written whole.
type InferenceSettings struct {
	// Models is the allow-list; null is not set (no narrowing), [] allows none.
	Models []string `json:"models"`
	// BudgetUSD is a calendar month's budget in US dollars; null is none.
	BudgetUSD *float64 `json:"budget_usd"`
	// Rate is requests per period, such as "60/m"; null is no limit.
	Rate *string `json:"rate"`
	// SystemPrompt is prepended to every request's own; "" adds none.
	SystemPrompt string `json:"system_prompt"`
}

// InferenceStatus answers GET and PUT …/inference: the settings as
// written, this month's spend, and the models a key of the scope reaches.
type InferenceStatus struct {
	Organisation string            `json:"organisation"`
	Project      string            `json:"project,omitempty"` // a project's id; empty for the organisation
	ProjectName  string            `json:"project_name,omitempty"`
	Settings     InferenceSettings `json:"settings"`
	Month        time.Time         `json:"month"` // the month spent_usd counts, from its first instant (UTC)
	SpentUSD     float64           `json:"spent_usd"`
	ReservedUSD  float64           `json:"reserved_usd"` // held by requests in flight
	Reachable    []string          `json:"reachable"`
}

// Model is one model the caller's key may reach.
type Model struct {
	ID       string `json:"id"`
	Name     string `json:"name"`
	Provider string `json:"provider,omitempty"` // empty for a router
	// Router lists a routing alias's models; requests go to the first the
	// key may reach.
	Router        []string    `json:"router,omitempty"`
	Price         *ModelPrice `json:"price,omitempty"`
	ContextWindow int         `json:"context_window,omitempty"`
	MaxTokens     int         `json:"max_tokens,omitempty"`
}

// ModelPrice is what the gateway charges, in US dollars per million tokens.
type ModelPrice struct {
	Input      float64 `json:"input"`
	Output     float64 `json:"output"`
	CacheRead  float64 `json:"cache_read"`
	CacheWrite float64 `json:"cache_write"`
}

// ModelList answers GET /api/v1/models: chat models first, routers after.
type ModelList struct {
	Models []Model `json:"models"`
}

// SecretInfo is a project's secret by placeholder (GET and PUT
// /api/v1/orgs/{org}/projects/{project}/secrets…): never its value. An
// agent sandbox of the project has, in the variable Name, a placeholder
// the gateway's egress proxy replaces with the value in requests to
// Hosts, and only there.
type SecretInfo struct {
	Name      string    `json:"name"`
	Hosts     []string  `json:"hosts"`
	CreatedAt time.Time `json:"created_at"`
	CreatedBy string    `json:"created_by"` // the user's id
}

// SecretValue is PUT /api/v1/orgs/{org}/projects/{project}/secrets/{name}:
// the value (at most 16 KiB, never echoed or logged) and the hosts it is
// for (names or *.domain, :port when not 443).
type SecretValue struct {
	Value string   `json:"value"`
	Hosts []string `json:"hosts"`
}

// AgentConfig is an organisation's or a project's agent configuration
// (GET and PUT /api/v1/orgs/{org}[/projects/{project}]/agent-config): the
// user-level instructions its agent runs read (at most 64 KiB) and the
// effort they start with (low, medium, high, or empty). A run's is the
// organisation's and its project's together: the instructions
// concatenated, the organisation's first; the project's effort over the
// organisation's.
type AgentConfig struct {
	Instructions string `json:"instructions"`
	Effort       string `json:"effort,omitempty"`
	// Model is the model a run starts on when its create names none, if
	// the project may reach it in an API the runner speaks.
	Model string `json:"model,omitempty"`
	// Skills are skills in the Agent Skills layout, each a name and its
	// files (path in its directory → UTF-8 text, SKILL.md among them);
	// SkillsPath a directory of the run's repository whose subdirectories
	// are more, copied from the checkout at the run's start.
	Skills     []AgentSkill `json:"skills,omitempty"`
	SkillsPath string       `json:"skills_path,omitempty"`
	// MCP are the Model Context Protocol servers runs are given.
	MCP []MCPServer `json:"mcp,omitempty"`
	// PullRequests "off" keeps every run of the scope from opening a pull
	// (merge) request: a person opens it from the branch; "" or "on"
	// lets triggers and --open-pr open them.
	PullRequests string     `json:"pull_requests,omitempty"`
	UpdatedAt    *time.Time `json:"updated_at,omitempty"`
	UpdatedBy    string     `json:"updated_by,omitempty"` // a user's id
}

// AgentSkill is one skill of an agent configuration.
type AgentSkill struct {
	Name  string            `json:"name"`
	Files map[string]string `json:"files"`
}

// MCPServer is a Model Context Protocol server: a command in the image
// (stdio) or a remote server's URL.
type MCPServer struct {
	Name    string            `json:"name"`
	Command []string          `json:"command,omitempty"`
	URL     string            `json:"url,omitempty"`
	Env     map[string]string `json:"env,omitempty"`
}

// Trigger is a project's rule that starts agent runs (issue 23): the body
// of PUT /api/v1/orgs/{org}/projects/{project}/triggers/{name} and the
// answer of its GET.
type Trigger struct {
	ID   string `json:"id,omitempty"`
	Name string `json:"name,omitempty"`
	// On is what starts a run: github:labeled:LABEL,
	// github:comment:COMMAND, gitlab:labeled:LABEL, gitlab:comment:COMMAND,
	// webhook or schedule:CRON.
	On     string `json:"on"`
	Repo   string `json:"repo"`
	Base   string `json:"base,omitempty"`
	Class  string `json:"class,omitempty"`
	Runner string `json:"runner,omitempty"`
	Model  string `json:"model,omitempty"`
	Role   string `json:"role,omitempty"`
	// Task is a text/template of the run's task over the event's Title,
	// Body, URL, Number, Comment, Args, Label, Author, Repo, Payload and
	// (a schedule's) Time; empty is the thread's title, text and address
	// (a schedule's trigger must have one).
	Task        string  `json:"task,omitempty"`
	Concurrency int     `json:"concurrency,omitempty"` // 0 in a PUT is 1
	DailyTokens int64   `json:"daily_tokens,omitempty"`
	DailyUSD    float64 `json:"daily_usd,omitempty"`
	// OpenPR opens a draft pull (merge) request after a clean author run;
	// absent in a PUT is true where the forge takes them.
	OpenPR *bool `json:"open_pr,omitempty"`
	// Session makes the trigger's runs sessions: each stays after its
	// task, and a review of its pull request (or a comment there that
	// starts with /berth) is its next task.
	Session bool `json:"session,omitempty"`
	// NextAt is when a schedule's trigger fires next.
	NextAt *time.Time `json:"next_at,omitempty"`
	// HookURL is where a GitLab or generic webhook posts for it; a GitHub
	// App posts to the deployment's /hooks/v1/github.
	HookURL string `json:"hook_url,omitempty"`
	// Secret is its webhook's secret (GitLab's secret token, or the
	// generic webhook's HMAC key): shown to administrators only.
	Secret     string     `json:"secret,omitempty"`
	Owner      string     `json:"owner,omitempty"` // a user's id: its runs are theirs
	CreatedAt  *time.Time `json:"created_at,omitempty"`
	UpdatedAt  *time.Time `json:"updated_at,omitempty"`
	Deliveries []Delivery `json:"deliveries,omitempty"` // the latest, newest first (GET of one)
}

// TriggerList is the answer of GET /api/v1/orgs/{org}/projects/{project}/triggers.
type TriggerList struct {
	Triggers []Trigger `json:"triggers"`
}

// Delivery is an event handed to a trigger, and what became of it.
type Delivery struct {
	Trigger string    `json:"trigger,omitempty"` // its name
	ID      string    `json:"id"`
	At      time.Time `json:"at"`
	// Outcome is started, skipped (a limit or the budget; Reason says)
	// or failed (the run could not be created; Reason says).
	Outcome string `json:"outcome"`
	Reason  string `json:"reason,omitempty"`
	Sandbox string `json:"sandbox,omitempty"`
	// Again says the delivery was handed over before: nothing new.
	Again bool   `json:"again,omitempty"`
	URL   string `json:"url,omitempty"` // the thread it is about
}

// HookAnswer is the answer to a webhook's delivery: what each trigger it
// reached made of it (none: no trigger acts on it).
type HookAnswer struct {
	Deliveries []Delivery `json:"deliveries"`
}
