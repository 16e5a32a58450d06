package gateway_test

import (
	"errors"
	"net/http"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"berth.dev/berth/internal/api"
	"berth.dev/berth/internal/sandbox"
)

// scrape GETs /metrics with key and parses the answer as Prometheus text.
func scrape(t *testing.T, url, key string) (map[string]*dto.MetricFamily, int) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), "GET", url+"/metrics", nil)
	if err != nil {
		t.Fatal(err)
	}
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, resp.StatusCode
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	families, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("/metrics is not Prometheus text: %v", err)
	}
	return families, resp.StatusCode
}

// value finds the sample of family name whose labels are all of labels
// and returns its counter, gauge, or histogram count.
func value(t *testing.T, families map[string]*dto.MetricFamily, name string, labels map[string]string) float64 {
	t.Helper()
	f, ok := families[name]
	if !ok {
		t.Fatalf("no series %s", name)
	}
next:
	for _, m := range f.GetMetric() {
		for k, v := range labels {
			found := false
			for _, l := range m.GetLabel() {
				found = found || (l.GetName() == k && l.GetValue() == v)
			}
			if !found {
				continue next
			}
		}
		switch {
		case m.Counter != nil:
			return m.GetCounter().GetValue()
		case m.Gauge != nil:
			return m.GetGauge().GetValue()
		case m.Histogram != nil:
			return float64(m.GetHistogram().GetSampleCount())
		}
	}
	t.Fatalf("no %s%v", name, labels)
	return 0
}

// TestMetricsScrape scrapes /metrics after some work and checks it parses
// as Prometheus text with every series berth names, counted right, and
// that only an operator may read it.
func TestMetricsScrape(t *testing.T) {
	w := newWorld(t)
	ctx := t.Context()
	w.create(t, w.owner, "dev")
	w.create(t, w.member, "dev")
	if _, err := w.member.Suspend(ctx, "dev"); err != nil {
		t.Fatal(err)
	}
	if _, err := w.owner.CreateSandbox(ctx, api.CreateSandbox{Name: "big", Class: "nope", SSHKeys: []string{sshKey}}); err == nil {
		t.Fatal("a create with an unknown class was admitted")
	}
	release := w.drv.Hold()
	broken, err := w.owner.CreateSandbox(ctx, api.CreateSandbox{Name: "broken", Class: "standard", SSHKeys: []string{sshKey}})
	if err != nil {
		t.Fatal(err)
	}
	w.drv.FailStart(sandbox.ID(broken.ID), errors.New("image not found"))
	release()
	w.waitState(t, w.owner, broken.ID, "failed")
	// What the tunnel and the git credential route will report.
	w.metrics.TunnelOpened()
	w.metrics.TunnelOpened()
	w.metrics.TunnelClosed()
	w.metrics.TunnelBytes(1200, 34000)
	w.metrics.CredentialRequested("git", "issued")

	families, status := scrape(t, w.url, w.opKey)
	if status != http.StatusOK {
		t.Fatalf("operator's scrape: %d", status)
	}
	for _, c := range []struct {
		name   string
		labels map[string]string
		want   float64
	}{
		{"berth_sandboxes", map[string]string{"state": "running", "class": "standard"}, 1},
		{"berth_sandboxes", map[string]string{"state": "suspended", "class": "standard"}, 1},
		{"berth_sandbox_creates_total", map[string]string{"purpose": "engineer"}, 3},
		{"berth_sandbox_creates_total", map[string]string{"purpose": "agent"}, 0},
		{"berth_sandbox_create_failures_total", map[string]string{"stage": "admission"}, 1},
		{"berth_sandbox_create_failures_total", map[string]string{"stage": "start"}, 1},
		{"berth_sandbox_ready_seconds", map[string]string{"purpose": "engineer"}, 2},
		{"berth_credential_requests_total", map[string]string{"kind": "git", "outcome": "issued"}, 1},
		{"berth_tunnel_connections_total", nil, 2},
		{"berth_tunnel_connections_open", nil, 1},
		{"berth_tunnel_bytes_total", map[string]string{"direction": "to_sandbox"}, 1200},
		{"berth_tunnel_bytes_total", map[string]string{"direction": "from_sandbox"}, 34000},
	} {
		if got := value(t, families, c.name, c.labels); got != c.want {
			t.Errorf("%s%v = %v, want %v", c.name, c.labels, got, c.want)
		}
	}
	if got := value(t, families, "berth_sweep_duration_seconds", nil); got < 1 {
		t.Errorf("berth_sweep_duration_seconds counts %v sweeps, want the one at start-up at least", got)
	}

	if _, status := scrape(t, w.url, ""); status != http.StatusUnauthorized {
		t.Errorf("scrape without a key: %d, want 401", status)
	}
	adminKey := func() string { _, k := w.userKey(t, "acme", "metrics-admin", "admin"); return k }()
	if _, status := scrape(t, w.url, adminKey); status != http.StatusForbidden {
		t.Errorf("an administrator's scrape: %d, want 403 (operators only)", status)
	}
}
