// Command table prints the figures the benchmarks handed to bench/all
// (bench/internal/report's JSON lines, in the file named as its argument)
// as one Markdown table, in the order they came: the benchmark, the
// figure, berth's value, its baseline, their ratio, the goal, the number
// of runs the medians are of, and the machine's load while it was
// measured.
//
//	table FIGURES.jsonl
package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"

	"berth.dev/berth/bench/internal/report"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: table FIGURES.jsonl")
		os.Exit(2)
	}
	figs, err := read(os.Args[1])
	if err == nil {
		err = write(os.Stdout, figs)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "table:", err)
		os.Exit(1)
	}
}

// read reads the figures, one JSON object a line; a missing file is no
// figures.
func read(path string) ([]report.Figure, error) {
	f, err := os.Open(path)
	if os.IsNotExist(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var figs []report.Figure
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		if strings.TrimSpace(sc.Text()) == "" {
			continue
		}
		var fig report.Figure
		if err := json.Unmarshal(sc.Bytes(), &fig); err != nil {
			return nil, fmt.Errorf("%s:%d: %w", path, n, err)
		}
		figs = append(figs, fig)
	}
	return figs, sc.Err()
}

// write prints figs as a Markdown table whose columns line up.
func write(w io.Writer, figs []report.Figure) error {
	rows := [][]string{{"bench", "figure", "berth", "baseline", "ratio", "goal", "N", "load"}}
	for _, f := range figs {
		ratio := ""
		if f.Ratio != 0 {
			ratio = fmt.Sprintf("%.2f", f.Ratio)
		}
		rows = append(rows, []string{f.Bench, f.Name, f.Value, f.Baseline, ratio, f.Goal, fmt.Sprint(f.N), f.Load})
	}
	width := make([]int, len(rows[0]))
	for _, r := range rows {
		for i, cell := range r {
			width[i] = max(width[i], len([]rune(cell)))
		}
	}
	line := func(r []string) string {
		var b strings.Builder
		b.WriteString("|")
		for i, cell := range r {
			b.WriteString(" " + cell + strings.Repeat(" ", width[i]-len([]rune(cell))) + " |")
		}
		return b.String() + "\n"
	}
	var b strings.Builder
	b.WriteString(line(rows[0]))
	sep := make([]string, len(width))
	for i, n := range width {
		sep[i] = strings.Repeat("-", n)
	}
	b.WriteString(line(sep))
	for _, r := range rows[1:] {
		b.WriteString(line(r))
	}
	_, err := io.WriteString(w, b.String())
	return err
}
