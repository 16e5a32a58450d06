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
// request, streamed and not, by 1 and 64 concurrent clients, straight to
// the upstream (the scripted model server behind the vendor stand-in) and
// through the gateway with a sandbox's key, interleaved. It reports time
// to the first byte and to the last, p50 and p99, the difference in
// microseconds and the ratio of the medians.
//
//	go test ./internal/gateway -run '^$' -bench ModelProxy -benchtime 400x
func BenchmarkModelProxy(b *testing.B) {
	m := newModelWorld(b)
	sb, key := m.agentKey(b, "bench", "")
	v := m.vendors["openai"]
	upstream := ""
	for _, p := range m.inference.Catalog().Providers() {
		if p.Name == "openai" {
			upstream = p.URL
		}
	}
	hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 256, DisableCompression: true}}
	for _, stream := range []bool{false, true} {
		for _, clients := range []int{1, 64} {
			b.Run(fmt.Sprintf("stream=%v/clients=%d", stream, clients), func(b *testing.B) {
				body := fmt.Appendf(nil, `{"model":"gpt-test","stream":%v,"max_tokens":256,"messages":[{"role":"user","content":"Say hello"}]}`, stream)
				send := func(url, auth string, session bool) (ttfb, total time.Duration) {
					req, _ := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
					req.Header.Set("Content-Type", "application/json")
					req.Header.Set("Authorization", "Bearer "+auth)
					if session {
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
					mu                         sync.Mutex
					dFirst, dAll, pFirst, pAll []time.Duration
				)
				round := func(proxy bool) {
					var wg sync.WaitGroup
					for range clients {
						wg.Go(func() {
							var f, a time.Duration
							if proxy {
								f, a = send(m.url+"/v1/chat/completions", key, true)
							} else {
								f, a = send(upstream+"/chat/completions", v.cred, false)
							}
							mu.Lock()
							defer mu.Unlock()
							if proxy {
								pFirst, pAll = append(pFirst, f), append(pAll, a)
							} else {
								dFirst, dAll = append(dFirst, f), append(dAll, a)
							}
						})
					}
					wg.Wait()
				}
				round(false) // warm both paths' connections
				round(true)
				dFirst, dAll, pFirst, pAll = nil, nil, nil, nil
				for b.Loop() {
					round(false)
					round(true)
				}
				report := func(name string, direct, proxy []time.Duration) {
					d50, d99, p50, p99 := pct(direct, 50), pct(direct, 99), pct(proxy, 50), pct(proxy, 99)
					b.ReportMetric(float64(d50.Microseconds()), name+"-p50-direct-µs")
					b.ReportMetric(float64((p50 - d50).Microseconds()), name+"-p50-added-µs")
					b.ReportMetric(float64((p99 - d99).Microseconds()), name+"-p99-added-µs")
					b.ReportMetric(float64(p50)/float64(d50), name+"-p50-ratio")
				}
				report("ttfb", dFirst, pFirst)
				report("total", dAll, pAll)
				b.ReportMetric(0, "ns/op")
			})
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
