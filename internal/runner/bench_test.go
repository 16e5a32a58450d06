package runner_test

import (
	"strings"
	"testing"

	"berth.dev/berth/internal/runner"
)

// BenchmarkParseLine parses each runner's streams (captured; cursor's is
// synthetic) over and over and reports lines per second.
func BenchmarkParseLine(b *testing.B) {
	byRunner := map[string][][]byte{}
	for _, path := range streamFiles(b) {
		w, ok := streamWants()[streamName(path)]
		if !ok {
			b.Fatalf("%s: no runner for it", path)
		}
		byRunner[w.runner] = append(byRunner[w.runner], readLines(b, path)...)
	}
	for _, name := range runner.Names() {
		lines := byRunner[name]
		if len(lines) == 0 {
			b.Fatalf("%s: no stream to parse", name)
		}
		b.Run(strings.ReplaceAll(name, "-", "_"), func(b *testing.B) {
			r, _ := runner.Get(name)
			var size int64
			for _, l := range lines {
				size += int64(len(l))
			}
			b.SetBytes(size)
			b.ReportAllocs()
			n := 0
			for b.Loop() {
				var tel runner.Telemetry
				for _, l := range lines {
					r.ParseLine(&tel, l)
				}
				n += len(lines)
			}
			b.ReportMetric(float64(n)/b.Elapsed().Seconds(), "lines/s")
		})
	}
}
