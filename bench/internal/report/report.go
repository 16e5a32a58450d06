// Package report is how each benchmark hands its figures to bench/all,
// which prints them as one table: a benchmark calls Emit for every figure
// it measured, and when BERTH_BENCH_REPORT names a file, each figure is
// appended to it as one JSON line. Without it Emit does nothing, so a
// benchmark run by hand prints only its own output.
package report

import (
	"encoding/json"
	"fmt"
	"os"
)

// Figure is one row of bench/all's table: what was measured, berth's
// figure and its baseline's (as printed, units included), the ratio of
// the two (0 when the figure has no baseline), the goal the ratio or the
// figure is held to, the number of runs the medians are of, and the
// machine's load (/proc/loadavg) while it was measured.
type Figure struct {
	Bench    string  `json:"bench"`
	Name     string  `json:"name"`
	Value    string  `json:"value"`
	Baseline string  `json:"baseline,omitempty"`
	Ratio    float64 `json:"ratio,omitempty"`
	Goal     string  `json:"goal,omitempty"`
	N        int     `json:"n"`
	Load     string  `json:"load"`
}

// Emit appends f to the file BERTH_BENCH_REPORT names, if any.
func Emit(f Figure) error {
	path := os.Getenv("BERTH_BENCH_REPORT")
	if path == "" {
		return nil
	}
	line, err := json.Marshal(f)
	if err != nil {
		return err
	}
	file, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return fmt.Errorf("report: %w", err)
	}
	if _, err := file.Write(append(line, '\n')); err != nil {
		file.Close()
		return fmt.Errorf("report: %w", err)
	}
	return file.Close()
}
