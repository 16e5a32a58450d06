package report

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestLoadsString(t *testing.T) {
	for _, c := range []struct {
		loads Loads
		want  string
	}{
		{nil, "unknown"},
		{Loads{3.411}, "3.41"},
		{Loads{4.87, 2.1, 3}, "2.10–4.87"},
		{Loads{1.001, 1.004}, "1.00"},
	} {
		if got := c.loads.String(); got != c.want {
			t.Errorf("%v: %q, want %q", []float64(c.loads), got, c.want)
		}
	}
}

func TestEmitAppendsOneLineEach(t *testing.T) {
	path := filepath.Join(t.TempDir(), "figures.jsonl")
	t.Setenv("BERTH_BENCH_REPORT", path)
	want := []Figure{
		{Bench: "tunnel", Name: "bulk copy", Value: "229 MB/s", Baseline: "292 MB/s", Ratio: 0.78, Goal: "≥ 0.95", N: 7, Load: "1.20"},
		{Bench: "density", Name: "gateway RSS", Value: "80 MiB", N: 5, Load: "2.00–3.00"},
	}
	for _, f := range want {
		if err := Emit(f); err != nil {
			t.Fatal(err)
		}
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
	if len(lines) != len(want) {
		t.Fatalf("%d lines, want %d:\n%s", len(lines), len(want), b)
	}
	for i, line := range lines {
		var got Figure
		if err := json.Unmarshal([]byte(line), &got); err != nil {
			t.Fatal(err)
		}
		if got != want[i] {
			t.Errorf("line %d: %+v, want %+v", i, got, want[i])
		}
	}
}

func TestEmitWithoutAFileDoesNothing(t *testing.T) {
	t.Setenv("BERTH_BENCH_REPORT", "")
	if err := Emit(Figure{Bench: "x"}); err != nil {
		t.Fatal(err)
	}
}
