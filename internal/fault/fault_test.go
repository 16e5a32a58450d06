package fault_test

import (
	"errors"
	"fmt"
	"io/fs"
	"testing"

	"berth.dev/berth/internal/fault"
)

func TestKinds(t *testing.T) {
	cause := fmt.Errorf("open: %w", fs.ErrNotExist)
	tests := []struct {
		name    string
		err     error
		kind    fault.Kind
		message string
	}{
		{"bare kind", fault.NotFound, fault.NotFound, "not found"},
		{"wrapped bare kind", fmt.Errorf("sandbox a: %w", fault.Conflict), fault.Conflict, "sandbox a: conflict"},
		{"errorf", fault.Errorf(fault.Forbidden, "only %s may", "an administrator"), fault.Forbidden, "only an administrator may"},
		{"wrapped errorf", fmt.Errorf("suspend: %w", fault.Errorf(fault.Conflict, "sandbox a is %s", "stopped")), fault.Conflict, "suspend: sandbox a is stopped"},
		{"field", fault.Field("ttl", "%d is too long", 9), fault.Invalid, "ttl: 9 is too long"},
		{"cause", fault.Errorf(fault.Upstream, "vendor (%w)", cause), fault.Upstream, "vendor (open: file does not exist)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if !errors.Is(tt.err, tt.kind) {
				t.Errorf("errors.Is(%v, %s) = false", tt.err, tt.kind)
			}
			if got := fault.Of(tt.err); got != tt.kind {
				t.Errorf("Of = %q, want %q", got, tt.kind)
			}
			if got := tt.err.Error(); got != tt.message {
				t.Errorf("message %q, want %q", got, tt.message)
			}
			for _, other := range fault.Kinds {
				if other != tt.kind && errors.Is(tt.err, other) {
					t.Errorf("errors.Is(%v, %s) = true; its kind is %s", tt.err, other, tt.kind)
				}
			}
		})
	}
	if err := fault.Errorf(fault.Upstream, "vendor (%w)", cause); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the cause is lost: %v", err)
	}
	if f, ok := errors.AsType[*fault.Error](fault.Field("ttl", "bad")); !ok || f.Field != "ttl" {
		t.Errorf("Field: %#v, want Field ttl", f)
	}
	if got := fault.Of(errors.New("plain")); got != "" {
		t.Errorf("Of(plain) = %q, want none", got)
	}
}
