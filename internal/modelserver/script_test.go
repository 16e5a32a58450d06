package modelserver_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"berth.dev/berth/internal/modelserver"
)

func TestParseScript(t *testing.T) {
	tests := []struct {
		name    string
		json    string
		want    modelserver.Script
		wantErr string
	}{
		{"every kind of turn",
			`{"turns": [{"text": "I'll run it.", "command": "ls", "description": "List"}, {"text": "Done."},
			 {"error": {"status": 429, "message": "slow down"}}]}`,
			modelserver.Script{Turns: []modelserver.Turn{
				{Text: "I'll run it.", Command: "ls", Description: "List"},
				{Text: "Done."},
				{Error: &modelserver.Failure{Status: 429, Message: "slow down"}},
			}}, ""},
		{"no turns", `{"turns": []}`, modelserver.Script{}, "script has no turns"},
		{"empty turn", `{"turns": [{}]}`, modelserver.Script{}, "turn 0: needs text, command, tool or error"},
		{"error with text", `{"turns": [{"text": "x", "error": {"status": 400, "message": "m"}}]}`, modelserver.Script{}, "turn 0: an error turn has no text, command or tool"},
		{"status not an error", `{"turns": [{"text": "x"}, {"error": {"status": 200, "message": "m"}}]}`, modelserver.Script{}, "turn 1: error status 200 is not 4xx or 5xx"},
		{"unknown field", `{"turns": [{"txt": "x"}]}`, modelserver.Script{}, `unknown field "txt"`},
		{"trailing data", `{"turns": [{"text": "x"}]} {}`, modelserver.Script{}, "data after the script"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := modelserver.ParseScript([]byte(tt.json))
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("ParseScript err = %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("ParseScript: %v", err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("script (-want +got):\n%s", diff)
			}
		})
	}
}

func TestLoadScript(t *testing.T) {
	path := filepath.Join(t.TempDir(), "demo.json")
	if err := os.WriteFile(path, []byte(`{"turns": [{"text": "hi"}]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	got, err := modelserver.LoadScript(path)
	if err != nil || len(got.Turns) != 1 || got.Turns[0].Text != "hi" {
		t.Errorf("LoadScript = %+v, %v; want one text turn", got, err)
	}
	if _, err := modelserver.LoadScript(filepath.Join(t.TempDir(), "missing.json")); err == nil {
		t.Error("LoadScript(missing file) succeeded")
	}
}

func TestScenarios(t *testing.T) {
	for _, name := range []string{modelserver.ScenarioText, modelserver.ScenarioTool, modelserver.ScenarioError} {
		s, err := modelserver.Scenario(name)
		if err != nil {
			t.Fatalf("Scenario(%q): %v", name, err)
		}
		if err := s.Validate(); err != nil {
			t.Errorf("Scenario(%q) is invalid: %v", name, err)
		}
	}
	if _, err := modelserver.Scenario("nope"); err == nil {
		t.Error(`Scenario("nope") succeeded`)
	}
}

// The turn answering a call is the number of tool results the
// conversation holds, the last turn answering past the end.
func TestTurnFollowsToolResults(t *testing.T) {
	srv, url := start(t, modelserver.Script{Turns: []modelserver.Turn{
		{Command: "one"}, {Command: "two"}, {Text: "done"},
	}})
	tests := []struct {
		results  int
		wantCall string // the command called, or "" for text
		wantText string
	}{
		{0, "one", ""},
		{0, "one", ""}, // a retry gets the same turn
		{1, "two", ""},
		{2, "", "done"},
		{5, "", "done"},
	}
	for _, tt := range tests {
		got := readChat(t, post(t, url+"/v1/chat/completions", chatBody(true, tt.results, fn("bash", bashSchema))))
		gotCall := ""
		if got.args != "" {
			gotCall, _ = mustJSON(t, got.args)["command"].(string)
		}
		if gotCall != tt.wantCall || got.content != tt.wantText {
			t.Errorf("%d results: call %q text %q, want call %q text %q", tt.results, gotCall, got.content, tt.wantCall, tt.wantText)
		}
	}
	var turns []int
	for _, r := range srv.Requests() {
		turns = append(turns, r.Turn)
	}
	if diff := cmp.Diff([]int{0, 0, 1, 2, 2}, turns); diff != "" {
		t.Errorf("recorded turns (-want +got):\n%s", diff)
	}
}
