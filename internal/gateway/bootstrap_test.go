package gateway_test

import (
	"encoding/json"
	"net/http"
	"testing"

	"berth.dev/berth/internal/api"
)

// TestBootstrapRefusesBadTokens: the bootstrap route is public, its token
// the credential; without one, or with one it does not know, it answers
// 401 and nothing else (the success path runs in the kubernetes driver's
// integration test, with a warm pool).
func TestBootstrapRefusesBadTokens(t *testing.T) {
	w := newWorld(t)
	for _, tc := range []struct{ name, auth string }{
		{"no token", ""},
		{"not a bootstrap token", "Bearer " + w.opKey},
		{"unknown token", "Bearer bst_AAAAAAAAAAAAAAAAAAAAAAAAAA"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, w.url+api.BootstrapPath, nil)
			if tc.auth != "" {
				req.Header.Set("Authorization", tc.auth)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			var e api.Error
			_ = json.NewDecoder(resp.Body).Decode(&e)
			if resp.StatusCode != http.StatusUnauthorized || e.Code != api.CodeUnauthenticated {
				t.Errorf("POST %s = %d %q, want 401 unauthenticated", api.BootstrapPath, resp.StatusCode, e.Code)
			}
		})
	}
}
