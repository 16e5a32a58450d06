package gateway

import (
	"slices"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
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
