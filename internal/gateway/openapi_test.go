package gateway

import (
	"slices"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"berth.dev/berth/internal/agentrun"
	"berth.dev/berth/internal/api"
	"berth.dev/berth/internal/sandbox"
)

// TestOpenAPIDescribesEveryRoute checks the OpenAPI description against the
// route table, both ways: every route is described and every described
// operation is served.
func TestOpenAPIDescribesEveryRoute(t *testing.T) {
	var doc struct {
		Paths map[string]map[string]any `yaml:"paths"`
	}
	if err := yaml.Unmarshal(openAPI, &doc); err != nil {
		t.Fatalf("openapi.yaml does not parse: %v", err)
	}
	var described []string
	for path, ops := range doc.Paths {
		for method := range ops {
			if method == "parameters" {
				continue
			}
			described = append(described, strings.ToUpper(method)+" "+path)
		}
	}
	var served []string
	for _, rt := range (&Server{}).routes() {
		// A trailing wildcard {x...} is {x} in OpenAPI.
		served = append(served, rt.method+" "+strings.ReplaceAll(rt.path, "...}", "}"))
	}
	slices.Sort(described)
	slices.Sort(served)
	for _, op := range served {
		if !slices.Contains(described, op) {
			t.Errorf("route %s is not in openapi.yaml", op)
		}
	}
	for _, op := range described {
		if !slices.Contains(served, op) {
			t.Errorf("openapi.yaml describes %s, which is not served", op)
		}
	}
}

// TestOpenAPIGivesEveryBodyLimit checks each route's body limit against
// the description: a route under the body rule with a limit other than
// api.MaxBody gives it as x-berth-body-limit, and describes the 413; a
// stream says "none"; every entry of bodyLimits names a route.
func TestOpenAPIGivesEveryBodyLimit(t *testing.T) {
	var doc struct {
		Paths map[string]map[string]yaml.Node `yaml:"paths"`
	}
	if err := yaml.Unmarshal(openAPI, &doc); err != nil {
		t.Fatalf("openapi.yaml does not parse: %v", err)
	}
	s := &Server{}
	named := map[string]bool{}
	for _, rt := range s.routes() {
		key := rt.method + " " + rt.path
		named[key] = true
		var op struct {
			Limit     any            `yaml:"x-berth-body-limit"`
			Responses map[string]any `yaml:"responses"`
		}
		node := doc.Paths[strings.ReplaceAll(rt.path, "...}", "}")][strings.ToLower(rt.method)]
		if err := node.Decode(&op); err != nil {
			t.Fatalf("%s: %v", key, err)
		}
		limit := s.bodyLimit(rt)
		switch {
		case limit < 0 && (strings.HasPrefix(rt.path, "/v1/") || strings.HasPrefix(rt.path, "/v1beta/")):
			// The model routes limit their bodies themselves and answer in
			// their vendor's shape.
		case limit < 0:
			if (rt.method == "POST" || rt.method == "PUT") && op.Limit != "none" {
				t.Errorf("%s reads its body as a stream; openapi.yaml says x-berth-body-limit %v, want none", key, op.Limit)
			}
		case limit == api.MaxBody && op.Limit != nil:
			t.Errorf("%s takes api.MaxBody; openapi.yaml says x-berth-body-limit %v", key, op.Limit)
		case limit != api.MaxBody && op.Limit != limit && op.Limit != int(limit):
			t.Errorf("%s takes %d bytes; openapi.yaml says x-berth-body-limit %v", key, limit, op.Limit)
		}
		if limit >= 0 && (rt.method == "POST" || rt.method == "PUT") && op.Responses["413"] == nil {
			t.Errorf("%s: openapi.yaml describes no 413", key)
		}
	}
	for key := range s.bodyLimits() {
		if !named[key] {
			t.Errorf("bodyLimits names %q, which is not a route", key)
		}
	}
}

// TestStatesOnTheWire: the API's typed states are the domain's, spelled
// as it spells them (SPEC S3 for a sandbox's, S13 for a run's), and the
// OpenAPI description's enums list exactly them, so a client comparing
// with api's constants sees every state the gateway sends.
func TestStatesOnTheWire(t *testing.T) {
	sandboxStates := map[api.State]sandbox.State{
		api.StateStarting: sandbox.StateStarting, api.StateRunning: sandbox.StateRunning, api.StateSuspended: sandbox.StateSuspended,
		api.StateExpired: sandbox.StateExpired, api.StateFailed: sandbox.StateFailed, api.StateTerminated: sandbox.StateTerminated,
	}
	runStates := map[api.RunState]agentrun.RunState{
		api.RunRunning: agentrun.RunRunning, api.RunSucceeded: agentrun.RunSucceeded, api.RunFailed: agentrun.RunFailed,
	}
	for wire, domain := range sandboxStates {
		if string(wire) != string(domain) {
			t.Errorf("the API says sandbox state %s as %q", domain, wire)
		}
	}
	for wire, domain := range runStates {
		if string(wire) != string(domain) {
			t.Errorf("the API says run state %s as %q", domain, wire)
		}
	}
	var doc struct {
		Components struct {
			Schemas map[string]struct {
				Properties map[string]struct {
					Enum []string `yaml:"enum"`
				} `yaml:"properties"`
			} `yaml:"schemas"`
		} `yaml:"components"`
	}
	if err := yaml.Unmarshal(openAPI, &doc); err != nil {
		t.Fatalf("openapi.yaml does not parse: %v", err)
	}
	enum := func(schema, field string) []string {
		e := slices.Clone(doc.Components.Schemas[schema].Properties[field].Enum)
		slices.Sort(e)
		return e
	}
	var sbWant, runWant []string
	for s := range sandboxStates {
		sbWant = append(sbWant, string(s))
	}
	for s := range runStates {
		runWant = append(runWant, string(s))
	}
	slices.Sort(sbWant)
	slices.Sort(runWant)
	if got, want := enum("Sandbox", "state"), sbWant; !slices.Equal(got, want) {
		t.Errorf("openapi.yaml's Sandbox.state is %v; the API's states are %v", got, want)
	}
	if got, want := enum("Run", "state"), runWant; !slices.Equal(got, want) {
		t.Errorf("openapi.yaml's Run.state is %v; the API's run states are %v", got, want)
	}
	for _, s := range enum("Run", "ended") {
		if _, known := sandboxStates[api.State(s)]; !known {
			t.Errorf("openapi.yaml's Run.ended has %q, which is no sandbox state", s)
		}
	}
}
