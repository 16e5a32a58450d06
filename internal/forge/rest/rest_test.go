package rest_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"berth.dev/berth/internal/forge"
	"berth.dev/berth/internal/forge/forgetest"
	"berth.dev/berth/internal/forge/github"
	"berth.dev/berth/internal/forge/gitlab"
	"berth.dev/berth/internal/secret"
)

// The forge's credentials: the GitLab deployment token and the GitHub App.
const (
	adminToken = "glpat-deployment-admin-0123456789"
	appID      = "424242"
)

// A forge that answers oddly still never gets a credential sent elsewhere
// or shown in an error.
func TestForgeAPIKeepsCredentials(t *testing.T) {
	elsewhere := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		t.Errorf("a redirect was followed to another host: %s %s", r.Method, r.URL)
	}))
	t.Cleanup(elsewhere.Close)
	// echo answers an error quoting the request's credentials back.
	echo := func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusBadRequest)
		_ = json.NewEncoder(w).Encode(map[string]string{
			"message": "you sent " + r.Header.Get("Private-Token") + " and " + r.Header.Get("Authorization"),
		})
	}
	redirect := func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, elsewhere.URL+r.URL.Path, http.StatusFound)
	}
	_, pemKey := forgetest.NewAppKey(t)

	tests := []struct {
		name    string
		kind    string
		handler http.HandlerFunc
		want    string // in the error
	}{
		{"GitLab redirects elsewhere", "gitlab", redirect, "302 Found"},
		{"GitLab echoes its token", "gitlab", echo, "you sent [redacted]"},
		{"GitHub redirects elsewhere", "github", redirect, "302 Found"},
		{"GitHub echoes the JWT", "github", echo, "and Bearer [redacted]"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := httptest.NewServer(tt.handler)
			t.Cleanup(srv.Close)
			var f forge.Forge
			var err error
			if tt.kind == "gitlab" {
				f, err = gitlab.New(gitlab.Config{URL: srv.URL, Token: secret.New(adminToken)}, srv.Client(), time.Now)
			} else {
				f, err = github.New(github.Config{URL: srv.URL, AppID: appID, Key: secret.New(string(pemKey))}, srv.Client(), time.Now)
			}
			if err != nil {
				t.Fatal(err)
			}
			_, err = f.Token(t.Context(), forge.Repo{Host: f.Host(), Path: "acme/app"}, time.Now().Add(time.Hour))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Token = %v, want an error saying %q", err, tt.want)
			}
			if msg := err.Error(); strings.Contains(msg, adminToken) || strings.Contains(msg, "eyJ") {
				t.Errorf("Token = %v: the error shows a credential", err)
			}
		})
	}
}
