package cli_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"berth.dev/berth/internal/api"
	"berth.dev/berth/internal/cli"
)

// mappingGateway plays the gateway's organisation mapping routes for
// berth org sso, as the real one checks them: a key, the method and path,
// and a body with both lists.
type mappingGateway struct {
	t   *testing.T
	url string

	mu    sync.Mutex
	calls []string
	body  map[string]any // the last PUT's
}

func newMappingGateway(t *testing.T) *mappingGateway {
	mg := &mappingGateway{t: t}
	mapping := api.SSOMapping{Members: []string{"eng", "contractors"}, Administrators: []string{"eng-leads"}}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mg.mu.Lock()
		defer mg.mu.Unlock()
		mg.calls = append(mg.calls, r.Method+" "+r.URL.Path)
		if got := r.Header.Get("Authorization"); got != "Bearer berth_abcdefghij012345_operator" {
			mg.t.Errorf("%s %s: Authorization %q, want the operator's key", r.Method, r.URL.Path, got)
			writeJSON(w, http.StatusUnauthorized, api.Error{Code: api.CodeUnauthenticated, Message: "no key"})
			return
		}
		switch r.Method + " " + r.URL.Path {
		case "GET /api/v1/whoami":
			writeJSON(w, http.StatusOK, api.Whoami{User: api.User{ID: "usr_op", Name: "ops", Role: "operator", Organisation: "org_main"},
				Organisation: api.Organisation{ID: "org_main", Name: "main"}, KeyID: "key_op"})
		case "GET /api/v1/orgs/acme/sso", "GET /api/v1/orgs/org_main/sso":
			writeJSON(w, http.StatusOK, mapping)
		case "PUT /api/v1/orgs/acme/sso":
			var body map[string]any
			dec := json.NewDecoder(r.Body)
			if err := dec.Decode(&body); err != nil {
				mg.t.Errorf("PUT: %v", err)
			}
			mg.body = body
			var m api.SSOMapping
			b, _ := json.Marshal(body)
			dec = json.NewDecoder(bytes.NewReader(b))
			dec.DisallowUnknownFields()
			if err := dec.Decode(&m); err != nil {
				mg.t.Errorf("PUT body %s is not an api.SSOMapping: %v", b, err)
			}
			writeJSON(w, http.StatusOK, m)
		default:
			mg.t.Errorf("the gateway was asked %s %s, which berth org sso never asks", r.Method, r.URL)
			writeJSON(w, http.StatusNotFound, api.Error{Code: api.CodeNotFound, Message: "no such route"})
		}
	}))
	t.Cleanup(srv.Close)
	mg.url = srv.URL
	return mg
}

// take returns and forgets what the gateway was asked.
func (mg *mappingGateway) take() ([]string, map[string]any) {
	mg.mu.Lock()
	defer mg.mu.Unlock()
	calls, body := mg.calls, mg.body
	mg.calls, mg.body = nil, nil
	return calls, body
}

// TestOrgSSO: berth org sso show reads an organisation's mapping (--org,
// else the caller's own); set replaces both lists, a list left out
// empty; giving neither is a usage mistake that reaches no gateway.
func TestOrgSSO(t *testing.T) {
	mg := newMappingGateway(t)
	tests := []struct {
		name      string
		args      []string
		wantCode  int
		wantCalls []string
		wantBody  string // the PUT's, as JSON
		wantOut   []string
	}{
		{"show", []string{"show", "--org", "acme"}, 0, []string{"GET /api/v1/orgs/acme/sso"}, "",
			[]string{`^members +eng, contractors$`, `^administrators +eng-leads$`}},
		{"show mine", []string{"show"}, 0, []string{"GET /api/v1/whoami", "GET /api/v1/orgs/org_main/sso"}, "",
			[]string{`^members +eng, contractors$`}},
		{"show json", []string{"show", "--org", "acme", "-o", "json"}, 0, []string{"GET /api/v1/orgs/acme/sso"}, "",
			[]string{`^  "members": \[$`, `^  "administrators": \[$`}},
		{"set both", []string{"set", "--org", "acme", "--members", "eng,contractors", "--administrators", "eng-leads"}, 0,
			[]string{"PUT /api/v1/orgs/acme/sso"}, `{"administrators":["eng-leads"],"members":["eng","contractors"]}`,
			[]string{`^members +eng, contractors$`, `^administrators +eng-leads$`}},
		{"set repeated and quoted", []string{"set", "--org", "acme", "--members", "eng", "--members", `"cn=ops,ou=groups"`, "--administrators", "leads"}, 0,
			[]string{"PUT /api/v1/orgs/acme/sso"}, `{"administrators":["leads"],"members":["eng","cn=ops,ou=groups"]}`,
			[]string{`^members +eng, cn=ops,ou=groups$`}},
		{"set empty members", []string{"set", "--org", "acme", "--members", "", "--administrators", "eng-leads"}, 0,
			[]string{"PUT /api/v1/orgs/acme/sso"}, `{"administrators":["eng-leads"],"members":[]}`,
			[]string{`^members +\(none\)$`, `^administrators +eng-leads$`}},
		{"set administrators only", []string{"set", "--org", "acme", "--administrators", "eng-leads", "-o", "json"}, 0,
			[]string{"PUT /api/v1/orgs/acme/sso"}, `{"administrators":["eng-leads"],"members":[]}`,
			[]string{`^  "members": \[\],$`}},
		{"set nothing", []string{"set", "--org", "acme"}, 2, nil, "",
			nil},
		{"set argument", []string{"set", "acme", "--members", "eng"}, 2, nil, "", nil},
		{"show argument", []string{"show", "acme"}, 2, nil, "", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			env := map[string]string{"BERTH_URL": mg.url, "BERTH_API_KEY": "berth_abcdefghij012345_operator"}
			var out, errs bytes.Buffer
			code := cli.Main(t.Context(), append([]string{"org", "sso"}, tt.args...), cli.Env{Stdin: strings.NewReader(""),
				Stdout: &out, Stderr: &errs, Getenv: func(k string) string { return env[k] }, HTTP: &http.Client{}, Now: time.Now})
			calls, body := mg.take()
			if code != tt.wantCode {
				t.Fatalf("berth org sso %q exited %d, want %d\nstdout: %s\nstderr: %s", tt.args, code, tt.wantCode, out.String(), errs.String())
			}
			if fmt.Sprint(calls) != fmt.Sprint(tt.wantCalls) {
				t.Errorf("the gateway was asked %q, want %q", calls, tt.wantCalls)
			}
			if tt.wantBody != "" {
				b, _ := json.Marshal(body)
				if string(b) != tt.wantBody {
					t.Errorf("PUT body %s, want %s", b, tt.wantBody)
				}
			}
			wantLines(t, "stdout", out.String(), tt.wantOut...)
			if tt.wantCode == 2 && !strings.Contains(errs.String(), "berth: ") {
				t.Errorf("stderr %q, want the mistake", errs.String())
			}
		})
	}
}

// TestOrgSSOHelp: set's help says it replaces both lists.
func TestOrgSSOHelp(t *testing.T) {
	code, out, _ := berthAt(t, offline(t), "org", "sso", "set", "--help")
	if code != 0 {
		t.Fatalf("org sso set --help exited %d", code)
	}
	wantLines(t, "org sso set --help", out,
		`^Replace an organisation's mapping: both lists are written as given, and a$`,
		`^list left out is set empty`,
		`--members strings +comma-separated groups whose people are members \(replaces the list\)`)
	_, out, _ = berthAt(t, offline(t), "org", "--help")
	wantLines(t, "org --help", out, `^  sso +Which identity-provider groups make an organisation's members and administrators$`)
}
