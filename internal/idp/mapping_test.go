package idp_test

import (
	"context"
	"strings"
	"testing"

	"berth.dev/berth/internal/idp"
)

// TestMappingRole: administrators' groups before members'; group names
// compared as the provider writes them, without case; no group named,
// no role; an operator is never a mapping's to give.
func TestMappingRole(t *testing.T) {
	m := idp.Mapping{Org: "acme", Members: []string{"engineering"}, Administrators: []string{" Platform "}}
	for _, tt := range []struct {
		groups []string
		want   idp.Role
	}{
		{[]string{"engineering"}, idp.RoleMember},
		{[]string{"engineering", "platform"}, idp.RoleAdmin},
		{[]string{"PLATFORM"}, idp.RoleAdmin},
		{[]string{"sales"}, idp.RoleNone},
		{nil, idp.RoleNone},
	} {
		if got := m.Role(idp.Identity{Groups: tt.groups}); got != tt.want {
			t.Errorf("groups %q: role %q, want %q", tt.groups, got, tt.want)
		}
	}
}

// TestConfigRefused: a provider berth cannot trust is refused before any
// request: no issuer, plain http off this machine, no client, scopes
// without openid.
func TestConfigRefused(t *testing.T) {
	for _, tt := range []struct {
		cfg  idp.Config
		want string
	}{
		{idp.Config{ClientID: "berth"}, "the issuer URL is required"},
		{idp.Config{Issuer: "http://idp.example.com", ClientID: "berth"}, "an https URL (http only on this machine's loopback)"},
		{idp.Config{Issuer: "https://idp.example.com"}, "the client id is required"},
		{idp.Config{Issuer: "https://idp.example.com", ClientID: "berth", Scopes: []string{"email"}}, "scopes: openid is required"},
	} {
		_, err := idp.New(context.Background(), tt.cfg, nil, nil)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("New(%+v) = %v, want %q", tt.cfg, err, tt.want)
		}
	}
}
