package gateway_test

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"slices"
	"sync"
	"testing"
	"time"
)

// BenchmarkModelProxy measures what the gateway adds to a model call
// (SPEC S14's target: p50 ≤ 1 ms, p99 ≤ 5 ms): the same Chat Completions
// request, streamed and not, straight to the upstream (the scripted model
// server behind the vendor stand-in) and through the gateway with a
// sandbox's key. It reports time to the first byte and to the last, p50
// and p99, the difference in microseconds and the ratio of the medians.
//
// Two loads, each at 1 and 64 clients:
//
//   - burst: an upstream that answers at once, and rounds in which every
//     client sends at the same instant, direct then through the gateway.
//     Nothing but the gateway's own work is measured, and 64 requests
//     arriving together queue for the CPU: on two cores the added time is
//     mostly that queue (≈ 32 × the gateway's CPU time per request).
//
//   - model: an upstream that starts answering 200 ms late, as a model
//     does (real ones take longer still), and clients that each send
//     their own requests one after another, alternating direct and
//     through the gateway: 64 agents working at once. Each client sends
//     at most 100 requests.
//
// Run it with:
//
//	go test ./internal/gateway -run '^$' -bench ModelProxy -benchtime 400x
func BenchmarkModelProxy(b *testing.B) {
	m := newModelWorld(b)
	sb, key := m.agentKey(b, "bench", "")
	v := m.vendors["openai"]
	v.mu.Lock()
	v.keep, v.got = false, nil
	v.mu.Unlock()
	upstream := ""
	for _, p := range m.inference.Catalog().Providers() {
		if p.Name == "openai" {
			upstream = p.URL
		}
	}
	hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 256, DisableCompression: true}}
	for _, load := range []struct {
		name  string
		think time.Duration
	}{{"burst", 0}, {"model", 200 * time.Millisecond}} {
		for _, stream := range []bool{false, true} {
			for _, clients := range []int{1, 64} {
				b.Run(fmt.Sprintf("load=%s/stream=%v/clients=%d", load.name, stream, clients), func(b *testing.B) {
					v.mu.Lock()
					v.think = load.think
					v.mu.Unlock()
					body := fmt.Appendf(nil, `{"model":"gpt-test","stream":%v,"max_tokens":256,"messages":[{"role":"user","content":"Say hello"}]}`, stream)
					send := func(proxy bool) (ttfb, total time.Duration) {
						url, auth := upstream+"/chat/completions", v.cred
						if proxy {
							url, auth = m.url+"/v1/chat/completions", key
						}
						req, _ := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
						req.Header.Set("Content-Type", "application/json")
						req.Header.Set("Authorization", "Bearer "+auth)
						if proxy {
							req.Header.Set("X-Berth-Session", sb)
						}
						start := time.Now()
						resp, err := hc.Do(req)
						if err != nil {
							b.Error(err)
							return
						}
						defer resp.Body.Close()
						one := make([]byte, 1)
						if _, err := io.ReadFull(resp.Body, one); err != nil || resp.StatusCode != 200 {
							b.Errorf("status %d: %v", resp.StatusCode, err)
						}
						ttfb = time.Since(start)
						_, _ = io.Copy(io.Discard, resp.Body)
						return ttfb, time.Since(start)
					}
					var (
						mu      sync.Mutex
						first   [2][]time.Duration // [0] direct, [1] through the gateway
						all     [2][]time.Duration
						measure bool
					)
					note := func(proxy bool, f, a time.Duration) {
						i := 0
						if proxy {
							i = 1
						}
						mu.Lock()
						defer mu.Unlock()
						if measure {
							first[i], all[i] = append(first[i], f), append(all[i], a)
						}
					}
					// burst: every client at once, direct, then every client
					// at once through the gateway.
					round := func() {
						for _, proxy := range []bool{false, true} {
							var wg sync.WaitGroup
							for range clients {
								wg.Go(func() { f, a := send(proxy); note(proxy, f, a) })
							}
							wg.Wait()
						}
					}
					// model: each client on its own, alternating; the clients
					// start spread over one answer's time, as independent
					// agents' requests are, not in step.
					agents := func(n int) {
						var wg sync.WaitGroup
						for c := range clients {
							wg.Go(func() {
								time.Sleep(load.think * time.Duration(c) / time.Duration(clients))
								for i := range n {
									proxy := i%2 == 1
									f, a := send(proxy)
									note(proxy, f, a)
								}
							})
						}
						wg.Wait()
					}
					if load.think == 0 {
						round() // warm both paths' connections
						measure = true
						for b.Loop() {
							round()
						}
					} else {
						agents(2)
						measure = true
						// b.N requests per path in all, shared by the
						// clients, at most 50 each.
						agents(2 * min(50, max(1, b.N/clients)))
					}
					report := func(name string, direct, proxy []time.Duration) {
						d50, d99, p50, p99 := pct(direct, 50), pct(direct, 99), pct(proxy, 50), pct(proxy, 99)
						b.ReportMetric(float64(d50.Microseconds()), name+"-p50-direct-µs")
						b.ReportMetric(float64((p50 - d50).Microseconds()), name+"-p50-added-µs")
						b.ReportMetric(float64((p99 - d99).Microseconds()), name+"-p99-added-µs")
						b.ReportMetric(float64(p50)/float64(d50), name+"-p50-ratio")
					}
					report("ttfb", first[0], first[1])
					report("total", all[0], all[1])
					b.ReportMetric(0, "ns/op")
				})
			}
		}
	}
}

// pct is the p-th percentile of ds.
func pct(ds []time.Duration, p int) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[min(len(s)-1, len(s)*p/100)]
}
