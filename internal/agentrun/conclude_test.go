package agentrun

import (
	"errors"
	"testing"

	"berth.dev/berth/internal/kelos"
	"berth.dev/berth/internal/runner"
	"berth.dev/berth/internal/sandbox"
)

// TestConclude walks the conclusion's table: what an exited run's exit
// code, its stream's error, a kelos image's setup and its sandbox's role
// make of it, and that only a clean author's run has its work taken.
func TestConclude(t *testing.T) {
	errPush := errors.New("the remote hung up")
	tests := []struct {
		name     string
		run      Run
		role     sandbox.Role
		push     error // what the push says
		pushed   bool  // the push was asked
		want     RunState
		wantErr  string
		wantBack error // conclude's own error
	}{
		{name: "clean author", run: Run{State: RunRunning}, role: sandbox.RoleAuthor, pushed: true, want: RunSucceeded},
		{name: "push failed", run: Run{State: RunRunning}, role: sandbox.RoleAuthor, push: errPush, pushed: true,
			want: RunFailed, wantErr: "push: the remote hung up"},
		{name: "ended before the push", run: Run{State: RunRunning}, role: sandbox.RoleAuthor, push: errEnded, pushed: true,
			want: RunRunning, wantBack: errEnded},
		{name: "clean reviewer", run: Run{State: RunRunning}, role: sandbox.RoleReviewer, want: RunSucceeded},
		{name: "non-zero exit", run: Run{State: RunRunning, ExitCode: 2, Telemetry: runner.Telemetry{Error: "rate limited"}},
			want: RunFailed, wantErr: "the agent exited 2: rate limited"},
		{name: "error in the stream, exit 0", run: Run{State: RunRunning, Telemetry: runner.Telemetry{Error: "no model"}},
			want: RunFailed, wantErr: "the agent reported an error: no model"},
		{name: "setup failed", run: Run{State: RunRunning, ExitCode: 1, Setup: kelos.SetupError},
			want: RunFailed, wantErr: "the setup command (KELOS_SETUP_COMMAND) failed, so the agent did not run (exit 1)"},
		{name: "setup cut short", run: Run{State: RunRunning, ExitCode: 137, Setup: kelos.SetupStarted},
			want: RunFailed, wantErr: "the setup command (KELOS_SETUP_COMMAND) did not finish (exit 137), so the agent did not run"},
		{name: "already failed", run: Run{State: RunFailed, Error: "its machine is gone"}, role: sandbox.RoleAuthor,
			want: RunFailed, wantErr: "its machine is gone"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			asked := false
			got, err := conclude(tt.run, tt.role, func() (string, string, error) {
				asked = true
				if tt.push != nil {
					return "", "", tt.push
				}
				return "berth/fix", "abc123", nil
			})
			if !errors.Is(err, tt.wantBack) || (tt.wantBack == nil) != (err == nil) {
				t.Fatalf("conclude: %v, want %v", err, tt.wantBack)
			}
			if asked != tt.pushed {
				t.Errorf("push asked: %v, want %v", asked, tt.pushed)
			}
			if got.State != tt.want || got.Error != tt.wantErr {
				t.Errorf("run %s %q, want %s %q", got.State, got.Error, tt.want, tt.wantErr)
			}
			if clean := tt.pushed && tt.push == nil; clean != (got.Branch == "berth/fix" && got.Commit == "abc123") {
				t.Errorf("run's branch %q at %q: want the push's only after a clean push", got.Branch, got.Commit)
			}
		})
	}
}
