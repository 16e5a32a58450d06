// Package inferencetest gives tests of a deployment that runs agents the
// inference they need: a real inference.Service over the scripted model
// server, which speaks every API, so any runner has a model to call.
package inferencetest

import (
	"fmt"
	"strings"
	"testing"

	"berth.dev/berth/internal/inference"
)

// Scripted returns an inference service on st and accounts that serves
// models (claude-sonnet-4-5 when none is named) through the scripted
// provider, its configs pointed at publicURL.
func Scripted(t testing.TB, st inference.Store, accounts inference.Accounts, publicURL string, models ...string) *inference.Service {
	t.Helper()
	if len(models) == 0 {
		models = []string{"claude-sonnet-4-5"}
	}
	var b strings.Builder
	b.WriteString("providers: [{name: scripted, kind: scripted}]\nmodels:\n")
	for _, m := range models {
		fmt.Fprintf(&b, "  - {id: %s, provider: scripted, price: {input: 3, output: 15, cache_read: 0.3, cache_write: 3.75}}\n", m)
	}
	cfg, err := inference.ParseConfig(strings.NewReader(b.String()))
	if err != nil {
		t.Fatal(err)
	}
	cat, err := inference.NewCatalog(cfg, func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	return inference.NewService(inference.Options{Catalog: cat, Store: st, Accounts: accounts, PublicURL: publicURL})
}
