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
