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

// CanHandleKeysOf reports whether p may list and revoke u's keys: their
// own; as an administrator, those of the members and administrators of
// their organisation (to end a leaked one); as an operator, anyone's.
// Nobody below operator touches an operator's keys: to them an
// operator's keys do not exist.
func (p Principal) CanHandleKeysOf(u User) bool {
	switch {
	case p.IsOperator(), p.User.ID == u.ID:
		return true
	case u.Role == RoleOperator:
		return false
	}
	return p.User.Role == RoleAdmin && p.User.Org == u.Org
}

// CanMintKeyFor reports whether p may mint a key of u's. A person's key
// is theirs alone: only they mint it, or an operator. An administrator
// who could mint a member's key could act as them, shell included, which
// SPEC S6 refuses administrators; they invite a new user instead.
func (p Principal) CanMintKeyFor(u User) bool {
	return p.IsOperator() || p.User.ID == u.ID
}
