package sandbox_test

import (
	"errors"
	"strings"
	"testing"

	"berth.dev/berth/internal/fault"
	"berth.dev/berth/internal/kelos"
	"berth.dev/berth/internal/sandbox"
	"berth.dev/berth/internal/sandbox/sandboxtest"
)

// TestCreateRefusesATaskOverItsContractsLimit: one byte over a contract's
// limit is refused at create, naming the task and the limit; so are a NUL
// byte and bytes that are not UTF-8, which neither an argument nor the
// store can hold.
func TestCreateRefusesATaskOverItsContractsLimit(t *testing.T) {
	e := newEnv(t)
	e.w.KelosClass(t)
	for _, tt := range []struct {
		name, class, task, want string
	}{
		{"berth's contract", "agent", sandboxtest.Task(sandbox.MaxTask + 1), "1048577 bytes; at most 1048576 bytes (1 MiB"},
		{"a kelos image", "kelos", sandboxtest.Task(kelos.MaxPrompt + 1), "131072 bytes; at most 131071 bytes"},
		{"a NUL byte", "agent", "fix\x00it", "NUL"},
		{"not UTF-8", "agent", "fix \xff it", "UTF-8"},
	} {
		_, err := e.svc.Create(t.Context(), e.alice, sandbox.CreateRequest{Name: "fix", Class: tt.class, Purpose: "agent",
			Repo: "acme/app", Task: tt.task, Runner: "claude-code"})
		var inv *fault.Error
		if !errors.As(err, &inv) || inv.Field != "task" || !strings.Contains(inv.Message, tt.want) {
			t.Errorf("%s: err = %v, want task refused saying %q", tt.name, err, tt.want)
		}
	}
	if sbs, err := e.st.ListSandboxes(t.Context(), sandbox.Filter{}); err != nil || len(sbs) != 0 {
		t.Errorf("after the refusals the store holds %d sandboxes (%v), want none", len(sbs), err)
	}
}
