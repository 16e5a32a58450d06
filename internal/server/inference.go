package server

import (
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"berth.dev/berth/internal/account"
	"berth.dev/berth/internal/inference"
	"berth.dev/berth/internal/modelserver"
	"berth.dev/berth/internal/sandbox"
	"berth.dev/berth/internal/store"
)

// buildInference makes the inference service of BERTH_INFERENCE_FILE, the
// scripted provider's server when the file has one, and the sandbox
// service's hook that tells each sandbox its models. Without the file it
// makes none of them.
func buildInference(cfg Config, st *store.Store, accounts *account.Service, log *slog.Logger) (*inference.Service, http.Handler, []sandbox.Option, error) {
	if cfg.Models == nil {
		return nil, nil, nil, nil
	}
	opts := inference.Options{Catalog: cfg.Models, Store: st, Accounts: accounts, Audit: st,
		PublicURL: cfg.SandboxPublicURL, Log: log, Now: time.Now}
	if st.Shared() {
		// Replicas share the budgets through leases in the database.
		opts.Leases = st
	}
	svc := inference.NewService(opts)
	var scripted http.Handler
	for _, p := range cfg.Models.Providers() {
		if p.Kind != inference.KindScripted {
			continue
		}
		script, err := scriptOf(p)
		if err != nil {
			return nil, nil, nil, fmt.Errorf("BERTH_INFERENCE_FILE: provider %s: %w", p.Name, err)
		}
		scripted = modelserver.New(script).Handler()
		log.Warn("inference: provider " + p.Name + " is the scripted model server: its answers are scripted, not a model's")
	}
	return svc, scripted, []sandbox.Option{sandbox.WithModelEnv(svc), sandbox.WithSessionMeter(st)}, nil
}

// scriptOf is a scripted provider's script: a ready scenario by name, or
// a JSON script file.
func scriptOf(p inference.Provider) (modelserver.Script, error) {
	if p.ScriptFile() {
		return modelserver.LoadScript(p.Script)
	}
	return modelserver.Scenario(p.Script)
}
