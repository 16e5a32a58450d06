package class

import "strings"

// Tier is an isolation tier (SPEC S5).
type Tier string

// The tiers of SPEC S5, weakest first.
const (
	TierStandard Tier = "standard"
	TierIsolated Tier = "isolated"
	TierVM       Tier = "vm"
)

// Setting names the BERTH_ setting that maps a tier to a runtime.
func (t Tier) Setting() string { return "BERTH_SANDBOX_RUNTIME_" + strings.ToUpper(string(t)) }

// Purpose says who a sandbox is for; a class says which purposes it
// serves.
type Purpose string

// The purposes of SPEC S1.
const (
	PurposeEngineer Purpose = "engineer"
	PurposeAgent    Purpose = "agent"
)

// GitMode is how a sandbox of a class reaches its repository (SPEC S9).
type GitMode string

// The git modes.
const (
	// GitGateway: the sandbox's remote is the gateway's git endpoint,
	// authenticated with the sandbox's own key; no forge token ever enters
	// the sandbox. The default, and the only mode for agent sandboxes.
	GitGateway GitMode = "gateway"
	// GitToken: the sandbox holds a short-lived token for its one
	// repository, refreshed by git-credential-berth (engineer sandboxes
	// whose tools need a real token).
	GitToken GitMode = "token"
)
