package e2e_test

import (
	"context"
	"crypto/rand"
	"net"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"berth.dev/berth/internal/api"
	"berth.dev/berth/internal/modelserver"
)

// TestAgentConfigReachesTheRealCLIs (issue 23): the organisation's and the
// project's instructions reach the model through each real CLI that is
// built (claude-code and pi by make images): the model server behind the
// gateway finds both markers in what the CLI sent, so the CLI read the
// file berth wrote where it reads its user-level instructions.
func TestAgentConfigReachesTheRealCLIs(t *testing.T) {
	orgMarker := "orgrule" + strings.ToLower(rand.Text()[:10])
	prjMarker := "projectrule" + strings.ToLower(rand.Text()[:10])
	sc, err := modelserver.Scenario(modelserver.ScenarioText)
	if err != nil {
		t.Fatal(err)
	}
	srv := modelserver.New(sc, modelserver.WithMarkers(orgMarker, prjMarker))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hs := &http.Server{ReadHeaderTimeout: 10 * time.Second, Handler: srv.Handler()}
	go func() { _ = hs.Serve(ln) }()
	t.Cleanup(func() { _ = hs.Close() })
	t.Setenv("E2E_VENDOR_KEY", "vendor-secret")
	runners := []string{"claude-code", "pi"}
	g := startAgentGateway(t, `providers:
  - {name: vendor, kind: anthropic, url: http://`+ln.Addr().String()+`, credential_env: E2E_VENDOR_KEY}
models:
  - {id: claude-sonnet-4-5, provider: vendor, price: {input: 3, output: 15, cache_read: 0.3, cache_write: 3.75}}
`, runners...)
	g.seedRepo("acme/app")
	ctx := context.Background()
	me, err := g.operator.Whoami(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := g.operator.SetAgentConfig(ctx, me.Organisation.ID, "", api.AgentConfig{Instructions: "Every answer mentions " + orgMarker + ".\n"}); err != nil {
		t.Fatal(err)
	}
	if _, err := g.operator.SetAgentConfig(ctx, me.Organisation.ID, "default", api.AgentConfig{Instructions: "Also mention " + prjMarker + ".\n", Effort: "low"}); err != nil {
		t.Fatal(err)
	}
	for _, r := range runners {
		t.Run(r, func(t *testing.T) {
			if !imageBuilt(g.root, agentImage(r)) {
				t.Skipf("%s is not built (images/build agent %s)", agentImage(r), r)
			}
			// The gateway does not pass its session header on to a vendor:
			// this run's calls are those that came after its create.
			before := len(srv.Requests())
			sb, err := g.operator.CreateSandbox(ctx, api.CreateSandbox{Name: "cfg-" + strings.ReplaceAll(r, "-", ""), Purpose: "agent", Repo: "acme/app",
				Task: "Say hello.", Runner: r})
			if err != nil {
				t.Fatal(err)
			}
			end := g.waitEnded(sb.ID, 3*time.Minute)
			if end.State != "terminated" || end.Run == nil || end.Run.State != "succeeded" {
				log, _ := g.berthErr("sandbox", "logs", "--raw", sb.Name)
				t.Fatalf("sandbox %s (%s), run %+v; log:\n%.4000s", end.State, end.Reason, end.Run, log)
			}
			var calls int
			for _, req := range srv.Requests()[before:] {
				if req.Dialect == "" {
					continue
				}
				calls++
				if !slices.Contains(req.Marked, orgMarker) || !slices.Contains(req.Marked, prjMarker) {
					t.Errorf("%s's model call %s carried markers %v; want the organisation's and the project's instructions", r, req.Path, req.Marked)
				}
			}
			if calls == 0 {
				t.Fatalf("the model server saw no call of %s's session", r)
			}
		})
	}
}
