package runner_test

import (
	"testing"

	"berth.dev/berth/internal/runner"
	"berth.dev/berth/internal/runner/runnertest"
)

// FuzzParseLine feeds every runner's ParseLine arbitrary lines, seeded
// with every captured line and the contract's garbage: it never panics,
// never produces impossible telemetry, and an ignored line changes
// nothing.
func FuzzParseLine(f *testing.F) {
	for _, path := range streamFiles(f) {
		for _, line := range readLines(f, path) {
			f.Add(line)
		}
	}
	for _, line := range runnertest.Garbage() {
		f.Add(line)
	}
	var rs []runner.Runner
	for _, name := range runner.Names() {
		r, _ := runner.Get(name)
		rs = append(rs, r)
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		for _, r := range rs {
			var tel runner.Telemetry
			out := r.ParseLine(&tel, line)
			if err := runnertest.Check(tel); err != nil {
				t.Errorf("%s: ParseLine(%q): %v", r.Name(), line, err)
			}
			if out.Ignored() && tel != (runner.Telemetry{}) {
				t.Errorf("%s: ParseLine(%q) = %v but changed the telemetry to %+v", r.Name(), line, out, tel)
			}
			tel.Settle(runner.ListPrices())
			if err := runnertest.Check(tel); err != nil {
				t.Errorf("%s: ParseLine(%q), settled: %v", r.Name(), line, err)
			}
		}
	})
}
