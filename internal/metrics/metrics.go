// Package metrics names berth's Prometheus collectors (SPEC S17) and
// registers them on a registry the composition root passes in: there is no
// package state and no default registry. The services report through small
// interfaces of their own (sandbox.Metrics); the tunnel and the git
// credential route call the methods here.
//
// Series:
//
//	berth_sandboxes{state,class}                      live sandboxes, read from the database at each scrape
//	berth_sandbox_creates_total{purpose}              sandboxes admitted
//	berth_sandbox_create_failures_total{stage}        creates refused at admission, or whose machine did not start
//	berth_sandbox_ready_seconds{purpose}              create → running (an engineer's: until sshd answers)
//	berth_sweep_duration_seconds                      one pass of the sweep
//	berth_credential_requests_total{kind,outcome}     credentials asked for by sandboxes (SPEC S9), and invitations redeemed
//	berth_tunnel_connections_total                    connections opened through the tunnel (SPEC S10)
//	berth_tunnel_connections_open                     of those, open now
//	berth_tunnel_bytes_total{direction}               bytes copied to_sandbox and from_sandbox
//	berth_egress_connections_total{class,decision}    connections through the egress proxy, allowed or refused
//	berth_egress_bytes_total{class,direction}         bytes through it, to_host and from_host
//
// Run tokens and cost join when agent runs exist (SPEC S8, S13), as
// berth_run_tokens_total{runner,model,kind} and
// berth_run_cost_dollars_total{runner,model}; nothing stands in for them
// until then.
package metrics

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"berth.dev/berth/internal/sandbox"
)

// Counter counts live sandboxes; the store implements it.
type Counter interface {
	CountSandboxes(ctx context.Context) ([]sandbox.Count, error)
}

// Metrics holds berth's collectors. Its methods may be called on a nil
// *Metrics, which records nothing, so a caller needs no check.
type Metrics struct {
	creates        *prometheus.CounterVec
	createFailures *prometheus.CounterVec
	ready          *prometheus.HistogramVec
	sweep          prometheus.Histogram
	credentials    *prometheus.CounterVec
	tunnels        prometheus.Counter
	tunnelsOpen    prometheus.Gauge
	tunnelBytes    *prometheus.CounterVec
	egress         *prometheus.CounterVec
	egressBytes    *prometheus.CounterVec
}

var _ sandbox.Metrics = (*Metrics)(nil)

// New makes the collectors and registers them, with one that counts the
// live sandboxes through count at each scrape.
func New(reg prometheus.Registerer, count Counter) (*Metrics, error) {
	m := &Metrics{
		creates: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "berth_sandbox_creates_total", Help: "Sandboxes admitted, by purpose.",
		}, []string{"purpose"}),
		createFailures: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "berth_sandbox_create_failures_total",
			Help: "Creates that did not end in a running sandbox: refused or in error at admission, or whose machine did not start.",
		}, []string{"stage"}),
		ready: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "berth_sandbox_ready_seconds",
			Help:    "Time from a sandbox's create to running (an engineer's: until sshd answers), by purpose.",
			Buckets: []float64{0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300},
		}, []string{"purpose"}),
		sweep: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "berth_sweep_duration_seconds",
			Help:    "Time one pass of the sweep took.",
			Buckets: []float64{0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10},
		}),
		credentials: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "berth_credential_requests_total",
			Help: "Credentials asked of the gateway by sandboxes, and invitations exchanged for keys, by kind (such as git or invitation) and outcome (such as issued, refused, rate_limited).",
		}, []string{"kind", "outcome"}),
		tunnels: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "berth_tunnel_connections_total", Help: "Connections opened to sandboxes through the gateway's tunnel.",
		}),
		tunnelsOpen: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "berth_tunnel_connections_open", Help: "Connections through the gateway's tunnel open now.",
		}),
		tunnelBytes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "berth_tunnel_bytes_total", Help: "Bytes copied through the gateway's tunnel, to_sandbox or from_sandbox.",
		}, []string{"direction"}),
		egress: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "berth_egress_connections_total", Help: "Connections asked of the egress proxy by agent sandboxes, by their class and decision (allowed, refused).",
		}, []string{"class", "decision"}),
		egressBytes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "berth_egress_bytes_total", Help: "Bytes through the egress proxy, by the sandbox's class, to_host or from_host.",
		}, []string{"class", "direction"}),
	}
	// Known label values start at zero, so every series is there from the
	// first scrape and rate() has a beginning.
	for _, p := range []sandbox.Purpose{sandbox.PurposeEngineer, sandbox.PurposeAgent} {
		m.creates.WithLabelValues(string(p))
		m.ready.WithLabelValues(string(p))
	}
	for _, s := range []string{sandbox.StageAdmission, sandbox.StageStart} {
		m.createFailures.WithLabelValues(s)
	}
	for _, d := range []string{"to_sandbox", "from_sandbox"} {
		m.tunnelBytes.WithLabelValues(d)
	}
	for _, c := range []prometheus.Collector{
		m.creates, m.createFailures, m.ready, m.sweep, m.credentials, m.tunnels, m.tunnelsOpen, m.tunnelBytes, m.egress, m.egressBytes,
		newSandboxes(count),
	} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// Created counts a sandbox admitted.
func (m *Metrics) Created(purpose sandbox.Purpose) {
	if m != nil {
		m.creates.WithLabelValues(string(purpose)).Inc()
	}
}

// CreateFailed counts a create that did not end in a running sandbox.
func (m *Metrics) CreateFailed(stage string) {
	if m != nil {
		m.createFailures.WithLabelValues(stage).Inc()
	}
}

// Ready observes a new sandbox's time from create to running.
func (m *Metrics) Ready(purpose sandbox.Purpose, d time.Duration) {
	if m != nil {
		m.ready.WithLabelValues(string(purpose)).Observe(d.Seconds())
	}
}

// Swept observes one sweep's duration.
func (m *Metrics) Swept(d time.Duration) {
	if m != nil {
		m.sweep.Observe(d.Seconds())
	}
}

// CredentialRequested counts a credential a sandbox asked for (SPEC S9:
// kind "git" for git-credential-berth) and how it was answered, such as
// "issued", "refused", "rate_limited" or "none" (the forge gave no token).
func (m *Metrics) CredentialRequested(kind, outcome string) {
	if m != nil {
		m.credentials.WithLabelValues(kind, outcome).Inc()
	}
}

// TunnelOpened counts a connection opened through the tunnel (SPEC S10).
// Call TunnelClosed when it ends.
func (m *Metrics) TunnelOpened() {
	if m != nil {
		m.tunnels.Inc()
		m.tunnelsOpen.Inc()
	}
}

// TunnelClosed records the end of a connection TunnelOpened counted.
func (m *Metrics) TunnelClosed() {
	if m != nil {
		m.tunnelsOpen.Dec()
	}
}

// TunnelBytes counts bytes copied through the tunnel: toSandbox from the
// client to the sandbox, fromSandbox back. Call it as bytes move or once
// when a connection ends.
// Egress counts one connection the egress proxy allowed or refused a
// sandbox of class, and the bytes it carried.
func (m *Metrics) Egress(class string, allowed bool, toHost, fromHost int64) {
	if m == nil {
		return
	}
	decision := "refused"
	if allowed {
		decision = "allowed"
	}
	m.egress.WithLabelValues(class, decision).Inc()
	if allowed {
		m.egressBytes.WithLabelValues(class, "to_host").Add(float64(toHost))
		m.egressBytes.WithLabelValues(class, "from_host").Add(float64(fromHost))
	}
}

func (m *Metrics) TunnelBytes(toSandbox, fromSandbox int64) {
	if m != nil {
		m.tunnelBytes.WithLabelValues("to_sandbox").Add(float64(toSandbox))
		m.tunnelBytes.WithLabelValues("from_sandbox").Add(float64(fromSandbox))
	}
}

// sandboxes reads the live sandboxes by state and class at each scrape.
type sandboxes struct {
	count Counter
	desc  *prometheus.Desc
}

func newSandboxes(count Counter) *sandboxes {
	return &sandboxes{count: count, desc: prometheus.NewDesc("berth_sandboxes",
		"Live sandboxes (those that count toward max-sandboxes), by state and class.", []string{"state", "class"}, nil)}
}

func (c *sandboxes) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

func (c *sandboxes) Collect(ch chan<- prometheus.Metric) {
	// Collect has no context of its own; a scrape should not wait long.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	counts, err := c.count.CountSandboxes(ctx)
	if err != nil {
		ch <- prometheus.NewInvalidMetric(c.desc, err)
		return
	}
	for _, n := range counts {
		ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, float64(n.N), string(n.State), n.Class)
	}
}
