// Package runnertest is the contract every runner.Runner keeps (SPEC S13):
// the argv shape (binary set, routed model present, prompt absent), the
// credentials declared by name, no secret value in argv, environment or
// config files, and ParseLine that never fails or panics on garbage.
package runnertest

import (
	"bytes"
	"encoding/json"
	"errors"
	"math"
	"path"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"

	"berth.dev/berth/internal/runner"
)

// Sentinel is the key value the suite plants in the environment under every
// credential name: found in argv, the environment or a config file, it
// means a runner copied a secret where only its name belongs.
const Sentinel = "sk-berth-runnertest-SENTINEL-7c41e9"

// envName is the shape of an environment variable a host may forward.
var envName = regexp.MustCompile(`^[A-Z_][A-Z0-9_]*$`)

// Options and Gateway are the sample inputs the suite renders with.
func Options() runner.Options { return runner.Options{Model: "model-under-test", Effort: "high"} }

// Gateway is a gateway serving the sample model and a router.
func Gateway() runner.Gateway {
	return runner.Gateway{
		BaseURL: "http://gateway.test:8080",
		Models: []runner.Model{
			{ID: "model-under-test", ContextWindow: 200000, MaxTokens: 32000, Price: &runner.Price{Input: 3, Output: 15}},
			{ID: "router-under-test", Router: true},
		},
	}
}

// Run checks r against the contract. It sets environment variables, so
// callers must not be parallel.
func Run(t *testing.T, r runner.Runner) {
	t.Helper()
	// Plant the sentinel where a careless runner would pick a key up.
	for _, name := range append(slices.Clone(r.Credentials()), "BERTH_API_KEY", "ANTHROPIC_API_KEY", "OPENAI_API_KEY", "GEMINI_API_KEY") {
		if envName.MatchString(name) {
			t.Setenv(name, Sentinel)
		}
	}

	t.Run("Name", func(t *testing.T) {
		if !regexp.MustCompile(`^[a-z][a-z0-9-]*$`).MatchString(r.Name()) {
			t.Errorf("Name() = %q, want lower-case letters, digits and dashes", r.Name())
		}
	})
	t.Run("Binary", func(t *testing.T) {
		if b := r.Binary(); b == "" || strings.ContainsFunc(b, isSpaceOrControl) {
			t.Errorf("Binary() = %q, want a command name", b)
		}
	})
	t.Run("ContainerArgs", func(t *testing.T) { checkArgs(t, r) })
	t.Run("Credentials", func(t *testing.T) { checkCredentials(t, r) })
	t.Run("Env", func(t *testing.T) { checkEnv(t, r) })
	t.Run("Files", func(t *testing.T) { checkFiles(t, r) })
	t.Run("ParseLineGarbage", func(t *testing.T) { checkGarbage(t, r) })
	t.Run("ParseLineConcurrent", func(t *testing.T) { checkConcurrent(t, r) })
}

func checkArgs(t *testing.T, r runner.Runner) {
	options := Options()
	args, err := r.ContainerArgs(options)
	if err != nil {
		t.Fatalf("ContainerArgs(%+v): %v", options, err)
	}
	if !slices.ContainsFunc(args, func(a string) bool { return strings.Contains(a, options.Model) }) {
		t.Errorf("ContainerArgs(%+v) = %q: the routed model is missing", options, args)
	}
	for _, a := range args {
		switch {
		case strings.Contains(a, Sentinel):
			t.Errorf("ContainerArgs holds a secret value: %q", a)
		case strings.Contains(a, "berth-prompt"):
			// The prompt file is the entrypoint's to feed on stdin; a CLI
			// told its path would read it some other way.
			t.Errorf("ContainerArgs names the prompt file: %q", a)
		case a == r.Binary():
			t.Errorf("ContainerArgs = %q repeats the binary %q", args, r.Binary())
		}
	}
	again, _ := r.ContainerArgs(options)
	if !slices.Equal(args, again) {
		t.Errorf("ContainerArgs is not deterministic: %q then %q", args, again)
	}
	for _, bad := range []runner.Options{
		{},
		{Model: "--dangerous"},
		{Model: "two words"},
		{Model: "line\nbreak"},
		{Model: "m", Effort: "-x"},
	} {
		if got, err := r.ContainerArgs(bad); err == nil {
			t.Errorf("ContainerArgs(%+v) = %q, want an error", bad, got)
		}
	}
}

func checkCredentials(t *testing.T, r runner.Runner) {
	creds := r.Credentials()
	seen := map[string]bool{}
	for _, c := range creds {
		if !envName.MatchString(c) {
			t.Errorf("credential %q: want a variable name matching %s", c, envName)
		}
		if seen[c] {
			t.Errorf("credential %q declared twice", c)
		}
		seen[c] = true
	}
}

func checkEnv(t *testing.T, r runner.Runner) {
	env, err := r.Env(Gateway())
	if err != nil {
		t.Fatalf("Env: %v", err)
	}
	seen := map[string]bool{}
	for _, v := range env {
		switch {
		case !envName.MatchString(v.Name):
			t.Errorf("Env: %q is not a variable name", v.Name)
		case slices.Contains(r.Credentials(), v.Name):
			t.Errorf("Env sets credential %s: credentials travel by name only", v.Name)
		case strings.Contains(v.Value, Sentinel):
			t.Errorf("Env: %s holds a secret value", v.Name)
		case seen[v.Name]:
			t.Errorf("Env sets %s twice", v.Name)
		}
		seen[v.Name] = true
	}
	for _, g := range badGateways() {
		_, err := r.Env(g)
		if err == nil {
			t.Errorf("Env(%q) succeeded, want an error", g.BaseURL)
		} else if strings.Contains(err.Error(), Sentinel) {
			t.Errorf("Env(%q): the error repeats a secret: %v", g.BaseURL, err)
		}
	}
}

func checkFiles(t *testing.T, r runner.Runner) {
	gateway, options := Gateway(), Options()
	files, err := r.Files(gateway, options)
	if err != nil {
		t.Fatalf("Files: %v", err)
	}
	seen := map[string]bool{}
	for _, f := range files {
		if f.Path == "" || path.IsAbs(f.Path) || path.Clean(f.Path) != f.Path || strings.HasPrefix(f.Path, "..") {
			t.Errorf("file %q: want a clean path relative to HOME", f.Path)
		}
		if seen[f.Path] {
			t.Errorf("file %q rendered twice", f.Path)
		}
		seen[f.Path] = true
		if bytes.Contains(f.Content, []byte(Sentinel)) {
			t.Errorf("file %s holds a secret value", f.Path)
		}
		if strings.HasSuffix(f.Path, ".json") && !json.Valid(f.Content) {
			t.Errorf("file %s is not valid JSON:\n%s", f.Path, f.Content)
		}
	}
	again, _ := r.Files(gateway, options)
	if len(again) != len(files) || !slices.EqualFunc(files, again, func(a, b runner.File) bool {
		return a.Path == b.Path && bytes.Equal(a.Content, b.Content)
	}) {
		t.Error("Files is not deterministic")
	}
	for _, g := range badGateways() {
		if _, err := r.Files(g, options); err == nil {
			t.Errorf("Files(%q) succeeded, want an error", g.BaseURL)
		}
	}
	if _, err := r.Files(gateway, runner.Options{}); err == nil {
		t.Error("Files with no model succeeded, want an error")
	}
}

func badGateways() []runner.Gateway {
	return []runner.Gateway{
		{},
		{BaseURL: "gateway.test:8080"},
		{BaseURL: "ftp://gateway.test"},
		{BaseURL: "http://user:" + Sentinel + "@gateway.test"},
		{BaseURL: "ftp://user:" + Sentinel + "@gateway.test"},
		{BaseURL: "http://user:" + Sentinel + "@gateway.test\x7f"},
		{BaseURL: "http://gateway.test/?key=x"},
	}
}

// Garbage is lines no runner's vocabulary holds, for ParseLine and for
// fuzzing seeds.
func Garbage() [][]byte {
	lines := []string{
		"", " ", "\n", "not json", "{", "}", "{]", "[]", "[{}]", "null", "true", "42", `"type"`,
		"{}", `{"type":null}`, `{"type":42}`, `{"type":{}}`, `{"type":"berth-unknown-line"}`,
		`{"type":"berth-unknown-line","usage":{"input_tokens":-5}}`,
		"\xff\xfe{\"type\":\"x\"}", `{"type":"x"` + strings.Repeat(" ", 100) + "}",
		strings.Repeat("[", 10000) + strings.Repeat("]", 10000),
		`{"type":"` + strings.Repeat("x", 1<<16) + `"}`,
		"data: {\"type\":\"x\"}", "event: message_start",
	}
	out := make([][]byte, len(lines))
	for i, l := range lines {
		out[i] = []byte(l)
	}
	return out
}

func checkGarbage(t *testing.T, r runner.Runner) {
	for _, line := range Garbage() {
		var tel runner.Telemetry
		out := r.ParseLine(&tel, line)
		if !out.Ignored() {
			t.Errorf("ParseLine(%.40q) = %v, want it ignored", line, out)
		}
		if err := Check(tel); err != nil {
			t.Errorf("ParseLine(%.40q): %v", line, err)
		}
		if tel.Usage != (runner.Usage{}) || tel.SessionID != "" || tel.Model != "" || tel.Error != "" {
			t.Errorf("ParseLine(%.40q) changed the telemetry to %+v", line, tel)
		}
	}
}

// Check reports a Telemetry that no stream should produce: negative tokens,
// reasoning beyond output, or a cost that is negative or not finite.
func Check(tel runner.Telemetry) error {
	u := tel.Usage
	var errs []error
	if u.Input < 0 || u.CacheRead < 0 || u.CacheWrite < 0 || u.Output < 0 || u.Reasoning < 0 {
		errs = append(errs, errors.New("negative token count"))
	}
	if u.Reasoning > u.Output {
		errs = append(errs, errors.New("more reasoning than output tokens"))
	}
	if tel.CostUSD < 0 || math.IsNaN(tel.CostUSD) || math.IsInf(tel.CostUSD, 0) {
		errs = append(errs, errors.New("cost not a finite non-negative number"))
	}
	if tel.Turns < 0 {
		errs = append(errs, errors.New("negative turns"))
	}
	return errors.Join(errs...)
}

// checkConcurrent parses from many goroutines at once: under -race it
// shows a runner keeps no state of its own.
func checkConcurrent(t *testing.T, r runner.Runner) {
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			var tel runner.Telemetry
			for _, line := range Garbage() {
				r.ParseLine(&tel, line)
			}
		})
	}
	wg.Wait()
}

func isSpaceOrControl(c rune) bool { return c <= ' ' || c == 0x7f }
