package server_test

import (
	"testing"

	"berth.dev/berth/internal/server"
)

// TestExampleInferenceFile: the example the README points at loads.
func TestExampleInferenceFile(t *testing.T) {
	env := map[string]string{"BERTH_INFERENCE_FILE": "../../examples/inference.yaml", "HOME": t.TempDir()}
	cfg, err := server.LoadConfig(func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	if ms := cfg.Models.Models(); len(ms) != 2 || ms[0].ID != "scripted" || !ms[1].Router() {
		t.Errorf("models %+v", ms)
	}
}
