package inference_test

import (
	"bytes"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"berth.dev/berth/internal/inference"
)

// TestCatalogRefusesBadFiles: every problem of a file is reported at once,
// naming the provider or model at fault.
func TestCatalogRefusesBadFiles(t *testing.T) {
	cfg, err := inference.ParseConfig(strings.NewReader(`
providers:
  - {name: a, kind: anthropic, url: "https://user:pw@example.com", credential_env: UNSET_KEY}
  - {name: s, kind: scripted, url: "http://x"}
  - {name: s2, kind: scripted}
  - {name: v, kind: vllm}
  - {name: o, kind: openai, url: "https://example.com/v1", credential_env: BERTH_API_KEY}
models:
  - {id: free, provider: s}
  - {id: m, provider: nowhere, price: {input: 1, output: 1}}
  - {id: r, router: [r2]}
  - {id: r2, router: [free]}
`))
	if err != nil {
		t.Fatal(err)
	}
	_, err = inference.NewCatalog(cfg, func(string) string { return "" })
	for _, want := range []string{
		"url: carries credentials", "UNSET_KEY is not set", "takes no url", "at most one scripted provider",
		`kind "vllm"`, `credential_env "BERTH_API_KEY"`, "free: no price", `provider "nowhere"`, `router target "r2"`,
	} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error %v\nlacks %q", err, want)
		}
	}
	if _, err := inference.ParseConfig(strings.NewReader("providers: []\nmodel: []\n")); err == nil {
		t.Error("an unknown field was accepted")
	}
}

// TestCatalogListPricesAndCredentials: a model without a price takes its
// list price; credentials are read from the named variables and never
// print.
func TestCatalogListPricesAndCredentials(t *testing.T) {
	cfg, err := inference.ParseConfig(strings.NewReader(`
providers: [{name: oai, kind: openai, url: "https://api.example.com/v1/", credential_env: OAI_KEY}]
models: [{id: fast, provider: oai, upstream: gpt-5-mini}]
`))
	if err != nil {
		t.Fatal(err)
	}
	cat, err := inference.NewCatalog(cfg, func(k string) string { return map[string]string{"OAI_KEY": "sk-secret"}[k] })
	if err != nil {
		t.Fatal(err)
	}
	m, _ := cat.Model("fast")
	p, _ := cat.Provider("oai")
	if m.Price.Input != 0.25 || p.URL != "https://api.example.com/v1" || p.Credential.Reveal() != "sk-secret" {
		t.Errorf("model %+v provider %+v", m, p)
	}
	var logs bytes.Buffer
	slog.New(slog.NewTextHandler(&logs, nil)).Info("x", "cred", p.Credential)
	if s := fmt.Sprintf("%v %+v %#v %s", p, p, p, logs.String()); strings.Contains(s, "sk-secret") {
		t.Errorf("the credential printed: %s", s)
	}
	if got := cat.CredentialEnvs(); len(got) != 1 || got[0] != "OAI_KEY" {
		t.Errorf("CredentialEnvs = %v", got)
	}
}

func TestParseRate(t *testing.T) {
	for in, want := range map[string]inference.Rate{
		"60/m": {60, time.Minute}, "10/s": {10, time.Second}, "1000/h": {1000, time.Hour},
		"5000/d": {5000, 24 * time.Hour}, "100/10m": {100, 10 * time.Minute},
	} {
		got, err := inference.ParseRate(in)
		if err != nil || got != want || got.String() != in {
			t.Errorf("ParseRate(%q) = %v (%s), %v; want %v", in, got, got, err, want)
		}
	}
	for _, in := range []string{"60", "0/m", "-1/m", "x/m", "5/ms", "5/fortnight"} {
		if _, err := inference.ParseRate(in); err == nil {
			t.Errorf("ParseRate(%q) accepted", in)
		}
	}
}
