package e2e_test

import (
	"fmt"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"berth.dev/berth/internal/api"
	"berth.dev/berth/internal/store/storetest"
)

// BenchmarkCreates measures sandbox creates through the API of real
// `berth serve` processes (fake driver, so only the gateway and its
// database are measured): on SQLite, and on PostgreSQL with one replica
// and with two sharing the database. Eight clients create at once,
// spread over the replicas. It reports creates per second and the p50 and
// p99 latency of one create; bench/creates runs it and takes medians.
func BenchmarkCreates(b *testing.B) {
	b.Run("sqlite-1", func(b *testing.B) {
		benchCreates(b, filepath.Join(b.TempDir(), "berth.db"), 1)
	})
	for _, n := range []int{1, 2} {
		b.Run(fmt.Sprintf("postgres-%d", n), func(b *testing.B) {
			benchCreates(b, storetest.PostgresURL(b), n)
		})
	}
}

const benchClients = 8

func benchCreates(b *testing.B, url string, replicas int) {
	gws := []*gateway{startReplica(b, url, nil)}
	for range replicas - 1 {
		gws = append(gws, startReplica(b, url, gws[0]))
	}
	var next atomic.Int64
	lat := make([]time.Duration, b.N)
	var wg sync.WaitGroup
	b.ResetTimer()
	began := time.Now()
	for c := range benchClients {
		cl := gws[c%len(gws)].operator
		wg.Go(func() {
			for {
				i := next.Add(1) - 1
				if i >= int64(b.N) {
					return
				}
				start := time.Now()
				_, err := cl.CreateSandbox(b.Context(), api.CreateSandbox{Name: fmt.Sprintf("b%d", i), Class: "standard", SSHKeys: []string{benchKey}})
				lat[i] = time.Since(start)
				if err != nil {
					b.Errorf("create b%d: %v", i, err)
					return
				}
			}
		})
	}
	wg.Wait()
	took := time.Since(began)
	b.StopTimer()
	slices.Sort(lat)
	b.ReportMetric(float64(b.N)/took.Seconds(), "creates/s")
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "p99-ms")
	b.ReportMetric(0, "ns/op") // the figures above say it better
}

const benchKey = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl bench"
