// Package sandbox owns sandboxes (SPEC S3, S11, S12): the state machine
// and its legal transitions, names and lifetimes, and the Service that
// creates, suspends, resumes, extends, terminates and sweeps sandboxes
// through a Driver, each made from a class of package class. It declares
// the Store and Driver it needs; adapters implement them. An agent
// sandbox's run is package agentrun's, which the service asks through the
// Runs port it declares.
package sandbox

import (
	"crypto/rand"
	"strings"
	"time"

	"berth.dev/berth/internal/class"
	"berth.dev/berth/internal/fault"
	"berth.dev/berth/internal/name"
	"berth.dev/berth/internal/quantity"
)

// ID identifies a sandbox: "sbx_" and 20 random characters.
type ID string

// NewID returns a fresh sandbox id.
func NewID() ID { return ID("sbx_" + strings.ToLower(rand.Text()[:20])) }

// A sandbox keeps the tier, purpose, git mode and image contract of its
// class; package class owns these words, and a sandbox says them too.
type (
	// Purpose says who a sandbox is for (SPEC S1).
	Purpose = class.Purpose
	// Tier is an isolation tier (SPEC S5).
	Tier = class.Tier
	// GitMode is how a sandbox reaches its repository (SPEC S9).
	GitMode = class.GitMode
	// Contract is the interface an agent image implements (SPEC S13,
	// S13.6).
	Contract = class.Contract
)

// The class's words, as a sandbox says them.
const (
	PurposeEngineer = class.PurposeEngineer
	PurposeAgent    = class.PurposeAgent
	TierStandard    = class.TierStandard
	TierIsolated    = class.TierIsolated
	TierVM          = class.TierVM
	GitGateway      = class.GitGateway
	GitToken        = class.GitToken
	ContractBerth   = class.ContractBerth
	ContractKelos   = class.ContractKelos
)

// ParsePurpose checks a purpose; empty means engineer.
func ParsePurpose(s string) (Purpose, error) {
	switch p := Purpose(s); p {
	case PurposeEngineer, PurposeAgent:
		return p, nil
	case "":
		return PurposeEngineer, nil
	}
	return "", fault.Field("purpose", "%q is not a purpose (engineer or agent)", s)
}

// Role says what an agent sandbox's run does with its work (SPEC S13.5).
type Role string

// The roles of an agent run.
const (
	// RoleAuthor pushes its work to berth/<name> after a clean run.
	RoleAuthor Role = "author"
	// RoleReviewer pushes nothing: it leaves a verdict the host digests.
	RoleReviewer Role = "reviewer"
)

// ParseRole checks the role of a sandbox of purpose: an agent sandbox's
// is author unless it says reviewer; an engineer sandbox has none.
func ParseRole(s string, purpose Purpose) (Role, error) {
	if purpose != PurposeAgent {
		if s != "" {
			return "", fault.Field("role", "only an agent sandbox has a role (--purpose agent)")
		}
		return "", nil
	}
	switch r := Role(s); r {
	case "":
		return RoleAuthor, nil
	case RoleAuthor, RoleReviewer:
		return r, nil
	}
	return "", fault.Field("role", "%q is not a role (author or reviewer)", s)
}

// Sandbox is one lent machine, as the database records it. It keeps its own
// copy of the image, tier and resources it was given, so a class changed or
// deleted later does not change a sandbox already made (SPEC S4).
type Sandbox struct {
	ID        ID
	Name      string
	Org       string
	Project   string
	Owner     string // user id
	Purpose   Purpose
	Class     string
	Image     string
	Isolation Tier
	Runtime   string // the runtime the tier mapped to at creation; "" is the driver's default
	CPU       quantity.Millicores
	Memory    quantity.Bytes
	Disk      quantity.Bytes // 0: none
	State     State
	Reason    string  // why it failed, or how it ended
	Repo      string  // the repository on the forge, as forge.Repo.String() names it
	GitMode   GitMode // how it reaches the repository; "" without one
	Branch    string
	Task      string
	Runner    string
	// Model is the model an agent's run starts on, chosen for its runner
	// at create and kept so a start a restart interrupted can be finished;
	// "" for an engineer sandbox (told the first model its key may reach).
	Model string
	Role  Role // an agent sandbox's; "" for an engineer's
	// Session says an agent sandbox stays after each task (SPEC S13,
	// sessions): suspended between tasks with its checkout, its branch and
	// its agent's state, until it is given the next (Task is the latest).
	Session bool
	// Checkpoint is the size of the checkpoint a suspended sandbox's
	// machine was saved to (its memory and processes, on a driver that is
	// a Checkpointer), which its resume restores; 0 when it has none: it
	// was suspended by stopping, or is not suspended.
	Checkpoint quantity.Bytes
	// ForkedFrom is the sandbox this one is a fork of (Fork); "" for one
	// made by a create. A session's fork's first task goes on from its
	// source's checkout and conversation.
	ForkedFrom ID
	// Compare are the agent sandboxes whose work a reviewer compares (a
	// session's forks' attempts at one task, best of N): nil for a
	// reviewer of one branch, and for any other sandbox.
	Compare []ID
	// Contract is the interface its image implements, and SetupCommand a
	// kelos image's setup command: the class's at creation.
	Contract     Contract
	SetupCommand []string
	SSHKeys      []string
	Env          map[string]string // caller-added; dropped by a resume after expiry
	KeyID        string            // the sandbox's current key
	// FromPool says the sandbox was taken from its class's warm pool (SPEC
	// S12): its machine fetches its environment with a bootstrap token at
	// every start instead of carrying it.
	FromPool bool
	// Egress is the policy it goes out under through the gateway's
	// proxy, as package egress writes it ("none", "open", or hosts); ""
	// for a sandbox made before egress policies.
	Egress    string
	CreatedAt time.Time
	ExpiresAt time.Time
	EndedAt   time.Time // zero while live
	// LifetimeCut is set on the sandbox a create or an extend returns when
	// the lifetime asked for was cut to a maximum: what to, and whose
	// ("ttl 5d is cut to 8h, the class's max_ttl"). It is never stored.
	LifetimeCut string

	// Ran is the total of the sandbox's closed running segments and
	// RunningSince the start of the open one (zero when none is open). The
	// store computes them from the segments table (SPEC S8).
	Ran          time.Duration
	RunningSince time.Time
	// FirstRan is when the sandbox first became running; zero if it never
	// has, so its volume holds nothing yet.
	FirstRan time.Time
	// LastRanUntil is the end of its latest closed running segment: when
	// it last stopped running (a session: when its latest task ended);
	// zero if no segment has closed.
	LastRanUntil time.Time
	// ActiveAt is when a connection through the gateway last opened,
	// closed or carried bytes, as the replicas saved it (SaveActivity);
	// zero when none has. A replica's own connections are newer in memory.
	ActiveAt time.Time
}

// RunningTime is the sum of the running segments at now: the clock stops at
// suspend, terminate and expiry, never past expiry (SPEC S8).
func (sb Sandbox) RunningTime(now time.Time) time.Duration {
	d := sb.Ran
	if !sb.RunningSince.IsZero() {
		end := now
		if !sb.ExpiresAt.IsZero() && sb.ExpiresAt.Before(end) {
			end = sb.ExpiresAt
		}
		if end.After(sb.RunningSince) {
			d += end.Sub(sb.RunningSince)
		}
	}
	return d
}

// StoppedAt is when a running segment of sb closes, at now, for a machine
// that stopped by itself at exited, as its runtime says: then, however
// late the gateway noticed (it was down, or a change went untold), but
// never past the expiry nor before the segment opened (SPEC S8). Zero
// exited is not known: the segment closes now, or at the expiry if that
// is earlier.
func (sb Sandbox) StoppedAt(exited, now time.Time) time.Time {
	at := now
	if !sb.ExpiresAt.IsZero() && sb.ExpiresAt.Before(now) {
		at = sb.ExpiresAt
	}
	if exited.IsZero() || !exited.Before(at) {
		return at
	}
	if exited.Before(sb.RunningSince) {
		return sb.RunningSince
	}
	return exited
}

// neverRan reports whether the sandbox has not been running yet.
func (sb Sandbox) neverRan() bool { return sb.FirstRan.IsZero() }

// CheckName reports whether s is a valid sandbox name (package name has
// the rule), naming field when it is not.
func CheckName(field, s string) error {
	if err := name.Check(s); err != nil {
		return fault.Field(field, "%v", err)
	}
	return nil
}
