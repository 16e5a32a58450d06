// Command emit hands one figure to bench/all from a benchmark written in
// shell (bench/creates): it is report.Emit with the figure's fields as
// flags, and does nothing when BERTH_BENCH_REPORT is unset.
//
//	emit -bench creates -name 'creates/s, postgres-1' -value '343 /s' \
//	     -baseline '589 /s (sqlite-1)' -ratio 0.58 -n 5 -load '2.10–3.00'
package main

import (
	"flag"
	"fmt"
	"os"

	"berth.dev/berth/bench/internal/report"
)

func main() {
	var f report.Figure
	flag.StringVar(&f.Bench, "bench", "", "the benchmark")
	flag.StringVar(&f.Name, "name", "", "what was measured")
	flag.StringVar(&f.Value, "value", "", "berth's figure, units included")
	flag.StringVar(&f.Baseline, "baseline", "", "its baseline's, units included")
	flag.Float64Var(&f.Ratio, "ratio", 0, "figure / baseline")
	flag.StringVar(&f.Goal, "goal", "", "the goal it is held to")
	flag.IntVar(&f.N, "n", 1, "runs the medians are of")
	flag.StringVar(&f.Load, "load", "", "the machine's load while measured (default: now)")
	flag.Parse()
	if f.Bench == "" || f.Name == "" || f.Value == "" {
		fmt.Fprintln(os.Stderr, "emit: -bench, -name and -value are required")
		os.Exit(2)
	}
	if f.Load == "" {
		var l report.Loads
		l.Sample()
		f.Load = l.String()
	}
	if err := report.Emit(f); err != nil {
		fmt.Fprintln(os.Stderr, "emit:", err)
		os.Exit(1)
	}
}
