package account_test

import (
	"testing"

	"berth.dev/berth/internal/account"
)

// TestPolicy is SPEC S6's table, one row per spec row, for a sandbox that
// belongs to "owner" in organisation "acme".
func TestPolicy(t *testing.T) {
	const org, owner = "org_acme", "usr_owner"
	tests := []struct {
		name                   string
		who                    account.User
		see, manage, openShell bool
	}{
		{"operator of another organisation", account.User{ID: "usr_op", Org: "org_other", Role: account.RoleOperator}, true, true, true},
		{"organisation administrator", account.User{ID: "usr_admin", Org: org, Role: account.RoleAdmin}, true, true, false},
		{"owner", account.User{ID: owner, Org: org, Role: account.RoleMember}, true, true, true},
		{"another member", account.User{ID: "usr_bob", Org: org, Role: account.RoleMember}, false, false, false},
		{"administrator of another organisation", account.User{ID: "usr_x", Org: "org_other", Role: account.RoleAdmin}, false, false, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := account.Principal{User: tt.who}
			if got := p.CanSee(org, owner); got != tt.see {
				t.Errorf("CanSee = %v, want %v", got, tt.see)
			}
			if got := p.CanManage(org, owner); got != tt.manage {
				t.Errorf("CanManage = %v, want %v", got, tt.manage)
			}
			if got := p.CanShell(owner); got != tt.openShell {
				t.Errorf("CanShell = %v, want %v", got, tt.openShell)
			}
		})
	}
}

// TestKeyPolicy: who may list and revoke (handle) and who may mint the
// keys of a member, an administrator and an operator of acme. Nobody below
// operator handles an operator's keys; only the user and an operator mint.
func TestKeyPolicy(t *testing.T) {
	const org = "org_acme"
	member := account.User{ID: "usr_member", Org: org, Role: account.RoleMember}
	admin := account.User{ID: "usr_admin", Org: org, Role: account.RoleAdmin}
	operator := account.User{ID: "usr_op", Org: org, Role: account.RoleOperator}
	tests := []struct {
		name         string
		who, of      account.User
		handle, mint bool
	}{
		{"operator, a member's", operator, member, true, true},
		{"operator of another organisation, a member's", account.User{ID: "usr_op2", Org: "org_other", Role: account.RoleOperator}, member, true, true},
		{"operator, another operator's", account.User{ID: "usr_op2", Org: org, Role: account.RoleOperator}, operator, true, true},
		{"administrator, a member's", admin, member, true, false},
		{"administrator, another administrator's", account.User{ID: "usr_admin2", Org: org, Role: account.RoleAdmin}, admin, true, false},
		{"administrator, the operator's", admin, operator, false, false},
		{"administrator, their own", admin, admin, true, true},
		{"administrator of another organisation, a member's", account.User{ID: "usr_x", Org: "org_other", Role: account.RoleAdmin}, member, false, false},
		{"member, their own", member, member, true, true},
		{"member, another member's", account.User{ID: "usr_bob", Org: org, Role: account.RoleMember}, member, false, false},
		{"member, the operator's", member, operator, false, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := account.Principal{User: tt.who}
			if got := p.CanHandleKeysOf(tt.of); got != tt.handle {
				t.Errorf("CanHandleKeysOf = %v, want %v", got, tt.handle)
			}
			if got := p.CanMintKeyFor(tt.of); got != tt.mint {
				t.Errorf("CanMintKeyFor = %v, want %v", got, tt.mint)
			}
		})
	}
}
