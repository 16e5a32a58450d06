package account

// Principal is an authenticated caller: a user, through one of their keys.
type Principal struct {
	User  User
	KeyID string
	// Sandbox is set when the key is a sandbox's own. Such a key acts for the
	// sandbox's owner on the routes a sandbox uses (inference, git), never on
	// the control API.
	Sandbox string
	Project string // a sandbox key's project scope
}

// IsOperator reports whether p acts across the whole deployment.
func (p Principal) IsOperator() bool { return p.User.Role == RoleOperator }

// IsAdminOf reports whether p administers org: an operator, or one of its
// administrators.
func (p Principal) IsAdminOf(org string) bool {
	return p.IsOperator() || (p.User.Role == RoleAdmin && p.User.Org == org)
}

// InOrg reports whether p may read org's shared things (its classes,
// projects and guardrails): a member of it, or an operator.
func (p Principal) InOrg(org string) bool {
	return p.IsOperator() || p.User.Org == org
}

// CanSee reports whether p may see a thing of owner's in org (SPEC S6):
// operators, the organisation's administrators, and the owner.
func (p Principal) CanSee(org, owner string) bool {
	return p.IsAdminOf(org) || p.User.ID == owner
}

// CanManage reports whether p may terminate, suspend, resume or extend a
// sandbox of owner's in org. S6 gives it to exactly those who may see it.
func (p Principal) CanManage(org, owner string) bool { return p.CanSee(org, owner) }

// CanShell reports whether p may open a shell in a sandbox of owner's
// (SPEC S6): operators and the owner; an administrator may not.
func (p Principal) CanShell(owner string) bool {
	return p.IsOperator() || p.User.ID == owner
}
