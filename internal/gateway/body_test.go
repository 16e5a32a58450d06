package gateway_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"berth.dev/berth/internal/api"
)

// bodyRoute is an operation of the OpenAPI description that takes a body
// under the gateway's one body rule.
type bodyRoute struct {
	method, path string // the path with its parameters filled in
	limit        int64
	json         bool // it takes a JSON body
	// sandboxOnly: only a sandbox's own key is let in, so the operator's
	// key these tests send is refused before anything reads the body.
	sandboxOnly bool
}

// bodyRoutes reads the served OpenAPI description for every POST and PUT
// the body rule covers, with the limit each one declares. The model routes
// answer in their vendor's error shape and have a limit of their own; git's
// and a run's output are streams (x-berth-body-limit: none).
func bodyRoutes(t *testing.T, w *world) []bodyRoute {
	t.Helper()
	resp, err := http.Get(w.url + "/openapi.yaml")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var doc struct {
		Paths map[string]map[string]yaml.Node `yaml:"paths"`
	}
	if err := yaml.NewDecoder(resp.Body).Decode(&doc); err != nil {
		t.Fatal(err)
	}
	fill := strings.NewReplacer("{org}", "acme", "{project}", "default", "{user}", "ada", "{ref}", "dev")
	var out []bodyRoute
	for path, ops := range doc.Paths {
		if strings.HasPrefix(path, "/v1/") || strings.HasPrefix(path, "/v1beta/") {
			continue
		}
		for method, node := range ops {
			if method != "post" && method != "put" {
				continue
			}
			var op struct {
				Limit       string `yaml:"x-berth-body-limit"`
				RequestBody struct {
					Content map[string]any `yaml:"content"`
				} `yaml:"requestBody"`
			}
			if err := node.Decode(&op); err != nil {
				t.Fatalf("%s %s: %v", method, path, err)
			}
			rt := bodyRoute{method: strings.ToUpper(method), path: fill.Replace(path), limit: api.MaxBody}
			switch op.Limit {
			case "none":
				continue
			case "":
			default:
				if rt.limit, err = strconv.ParseInt(op.Limit, 10, 64); err != nil {
					t.Fatalf("%s %s: x-berth-body-limit %q: %v", method, path, op.Limit, err)
				}
			}
			_, rt.json = op.RequestBody.Content["application/json"]
			rt.sandboxOnly = strings.HasPrefix(path, "/sandbox/v1/run/")
			out = append(out, rt)
		}
	}
	if len(out) < 15 {
		t.Fatalf("only %d routes take a body under the rule: the description did not parse as expected", len(out))
	}
	return out
}

// send sends body to a route with the operator's key; chunked sends it
// without a Content-Length, so only reading it finds it too long.
func send(t *testing.T, w *world, rt bodyRoute, body []byte, chunked bool) (int, api.Error) {
	t.Helper()
	var r io.Reader = bytes.NewReader(body)
	if chunked {
		r = io.MultiReader(r) // hides the length
	}
	req, err := http.NewRequestWithContext(t.Context(), rt.method, w.url+rt.path, r)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+w.opKey)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", rt.method, rt.path, err)
	}
	defer resp.Body.Close()
	var e api.Error
	b, _ := io.ReadAll(resp.Body)
	_ = json.Unmarshal(b, &e)
	return resp.StatusCode, e
}

// TestBodyOverTheLimitIsOneAnswer: every route answers a body over its
// limit the same way, 413 too_large naming the body and the limit, whether
// the length was announced or found by reading, and whoever reads the
// body (the JSON decoder, the sandboxes file's parser, or nobody).
func TestBodyOverTheLimitIsOneAnswer(t *testing.T) {
	w := newWorld(t)
	for _, rt := range bodyRoutes(t, w) {
		// A JSON string too long by one byte: valid up to the limit.
		big := []byte(`{"name":"` + strings.Repeat("a", int(rt.limit)) + `"}`)
		for _, chunked := range []bool{false, true} {
			if chunked && (!rt.json || rt.sandboxOnly) {
				continue // a handler that reads no body never finds out (agentpush_test reads a run's exit over its limit)
			}
			status, e := send(t, w, rt, big, chunked)
			want := fmt.Sprintf("%d bytes", rt.limit)
			if status != http.StatusRequestEntityTooLarge || e.Code != api.CodeTooLarge || e.Field != "body" || !strings.Contains(e.Message, want) {
				t.Errorf("%s %s with %d bytes (chunked %v): %d %+v; want 413 too_large on body saying %q",
					rt.method, rt.path, len(big), chunked, status, e, want)
			}
		}
	}
}

// TestTrailingDataIsRefused: a JSON body is one JSON value; anything after
// it is refused by the one decoder, on every JSON route, before the
// handler does anything.
func TestTrailingDataIsRefused(t *testing.T) {
	w := newWorld(t)
	for _, rt := range bodyRoutes(t, w) {
		if !rt.json || rt.sandboxOnly || rt.path == "/sandbox/v1/classes" { // a sandboxes file is YAML, which has its own errors
			continue
		}
		if strings.HasPrefix(rt.path, "/hooks/") {
			// A webhook's signature is checked before its body is read as
			// JSON: unsigned, it is 401 whatever follows; signed, package
			// trigger/event refuses trailing data (its tests).
			continue
		}
		for _, tail := range []string{"GARBAGE", "{}", `{"name":"x"}`, "\x00"} {
			status, e := send(t, w, rt, []byte(`{}`+tail), false)
			if status != http.StatusBadRequest || e.Code != api.CodeInvalid || e.Field != "body" {
				t.Errorf("%s %s with %q after the JSON: %d %+v; want 400 invalid on body", rt.method, rt.path, tail, status, e)
			}
		}
	}
	// What the issue found: this created an organisation.
	status, e := send(t, w, bodyRoute{method: "POST", path: "/api/v1/orgs"}, []byte(`{"name":"trailing"}GARBAGE`), false)
	if status != http.StatusBadRequest || !strings.Contains(e.Message, "after") {
		t.Errorf(`POST /api/v1/orgs {"name":"trailing"}GARBAGE: %d %+v, want 400 saying what follows the JSON`, status, e)
	}
	if _, err := w.operator.Org(t.Context(), "trailing"); err == nil {
		t.Error("the organisation was created from a body with trailing data")
	}
	// White space after the value is no trailing data.
	status, _ = send(t, w, bodyRoute{method: "POST", path: "/api/v1/orgs"}, []byte("{\"name\":\"spaced\"}\r\n\t \n"), false)
	if status != http.StatusCreated {
		t.Errorf("a body ending in white space: %d, want 201", status)
	}
}
