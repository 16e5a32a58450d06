package metrics_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"berth.dev/berth/internal/metrics"
	"berth.dev/berth/internal/sandbox"
)

// counterFunc counts sandboxes by calling itself.
type counterFunc func(context.Context) ([]sandbox.Count, error)

func (f counterFunc) CountSandboxes(ctx context.Context) ([]sandbox.Count, error) { return f(ctx) }

func TestANilMetricsRecordsNothing(t *testing.T) {
	var m *metrics.Metrics
	m.Created(sandbox.PurposeAgent)
	m.CreateFailed(sandbox.StageStart)
	m.Ready(sandbox.PurposeAgent, time.Second)
	m.Swept(time.Second)
	m.CredentialRequested("git", "issued")
	m.TunnelOpened()
	m.TunnelBytes(1, 2)
	m.TunnelClosed()
	m.Egress("agent", true, 1, 2)
}

// TestAFailedCountStillServesTheRest: when the database cannot be read,
// the scrape still answers with every other series.
func TestAFailedCountStillServesTheRest(t *testing.T) {
	reg := prometheus.NewRegistry()
	m, err := metrics.New(reg, counterFunc(func(context.Context) ([]sandbox.Count, error) {
		return nil, errors.New("database is locked")
	}))
	if err != nil {
		t.Fatal(err)
	}
	m.Swept(20 * time.Millisecond)
	srv := httptest.NewServer(promhttp.HandlerFor(reg, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError}))
	defer srv.Close()
	resp, err := http.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("scrape: %d", resp.StatusCode)
	}
	families, err := reg.Gather()
	if err == nil || !strings.Contains(err.Error(), "database is locked") {
		t.Errorf("Gather = %v, want the count's error", err)
	}
	var names []string
	for _, f := range families {
		names = append(names, f.GetName())
	}
	if !slices.Contains(names, "berth_sweep_duration_seconds") || !slices.Contains(names, "berth_sandbox_creates_total") {
		t.Errorf("with the count failing, the scrape holds %v; want the other series", names)
	}
}

func TestRegisteringTwiceIsRefused(t *testing.T) {
	reg := prometheus.NewRegistry()
	none := counterFunc(func(context.Context) ([]sandbox.Count, error) { return nil, nil })
	if _, err := metrics.New(reg, none); err != nil {
		t.Fatal(err)
	}
	if _, err := metrics.New(reg, none); err == nil {
		t.Error("a second set of the same collectors registered without error")
	}
}
