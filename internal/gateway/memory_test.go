package gateway_test

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
)

// TestGuardrailMemoryTakesQuantities: max_sandbox_memory takes a quantity
// as classes write memory ("32Gi") and still a JSON number of MiB, as the
// API took it before; the answer prints it one way, the class way. A value
// that is neither is refused naming the field and the units.
func TestGuardrailMemoryTakesQuantities(t *testing.T) {
	w := newWorld(t)
	put := func(body string) (int, map[string]any) {
		t.Helper()
		req, err := http.NewRequestWithContext(t.Context(), "PUT", w.url+"/api/v1/orgs/acme/guardrail", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+w.adminKey)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		var v map[string]any
		if err := json.Unmarshal(b, &v); err != nil {
			t.Fatalf("PUT %s: %d %s", body, resp.StatusCode, b)
		}
		return resp.StatusCode, v
	}
	for _, tt := range []struct{ in, want string }{
		{`"32Gi"`, "32Gi"}, {`32768`, "32Gi"}, {`"1536Mi"`, "1536Mi"}, {`"4G"`, "3815Mi"}, {`2048`, "2Gi"},
	} {
		code, v := put(`{"max_sandbox_memory": ` + tt.in + `}`)
		if code != http.StatusOK || v["max_sandbox_memory"] != tt.want {
			t.Errorf("max_sandbox_memory %s: %d %v, want 200 and %q", tt.in, code, v, tt.want)
		}
	}
	for _, bad := range []string{`"32GB"`, `true`, `"-1Gi"`} {
		code, v := put(`{"max_sandbox_memory": ` + bad + `}`)
		msg, _ := v["message"].(string)
		if code != http.StatusBadRequest || !strings.Contains(msg, "max_sandbox_memory") {
			t.Errorf("max_sandbox_memory %s: %d %v, want 400 naming the field", bad, code, v)
		}
	}
}
