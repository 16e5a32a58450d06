package gateway_test

import (
	"errors"
	"net/http"
	"testing"

	"berth.dev/berth/internal/api"
	"berth.dev/berth/internal/fault"
)

// TestKindsCrossTheWire: what a service refuses with a kind, the client
// refuses with the same kind (errors.Is on both sides of the wire), and it
// is still the *api.Error the CLI words.
func TestKindsCrossTheWire(t *testing.T) {
	w := newWorld(t)
	ctx := t.Context()
	sb := w.create(t, w.owner, "kinds")
	_, ambiguousErr := func() (api.Sandbox, error) {
		// Two people's sandboxes of one name, resolved by their administrator.
		w.create(t, w.member, "kinds")
		return w.admin.Sandbox(ctx, "kinds")
	}()
	_, badTTL := w.owner.CreateSandbox(ctx, api.CreateSandbox{Name: "kinds-ttl", Class: "standard", TTL: "forever", SSHKeys: []string{sshKey}})
	_, missing := w.owner.Sandbox(ctx, "nope")
	_, notYours := w.foreign.Sandbox(ctx, sb.ID)
	if _, err := w.owner.Suspend(ctx, sb.ID); err != nil {
		t.Fatal(err)
	}
	_, twice := w.owner.Suspend(ctx, sb.ID)

	tests := []struct {
		name   string
		err    error
		kind   fault.Kind
		status int
		code   string
		field  string
	}{
		{"unknown sandbox", missing, fault.NotFound, http.StatusNotFound, api.CodeNotFound, ""},
		{"another organisation's sandbox", notYours, fault.NotFound, http.StatusNotFound, api.CodeNotFound, ""},
		{"suspend a suspended sandbox", twice, fault.Conflict, http.StatusConflict, api.CodeConflict, ""},
		{"a name two people use", ambiguousErr, fault.Ambiguous, http.StatusConflict, api.CodeAmbiguous, ""},
		{"a ttl that is not one", badTTL, fault.Invalid, http.StatusBadRequest, api.CodeInvalid, "ttl"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if !errors.Is(tt.err, tt.kind) {
				t.Fatalf("err = %v, want errors.Is %s", tt.err, tt.kind)
			}
			for _, k := range fault.Kinds {
				if k != tt.kind && errors.Is(tt.err, k) {
					t.Errorf("err = %v is %s too", tt.err, k)
				}
			}
			e, ok := errors.AsType[*api.Error](tt.err)
			if !ok || e.Status != tt.status || e.Code != tt.code || e.Field != tt.field {
				t.Errorf("err = %#v, want an *api.Error %d %s on field %q", e, tt.status, tt.code, tt.field)
			}
			if tt.err.Error() != e.Error() {
				t.Errorf("message %q, want the *api.Error's %q", tt.err.Error(), e.Error())
			}
		})
	}
}
