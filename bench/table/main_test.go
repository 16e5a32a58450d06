package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestTable(t *testing.T) {
	path := filepath.Join(t.TempDir(), "figures.jsonl")
	lines := `{"bench":"tunnel","name":"bulk copy","value":"229 MB/s","baseline":"292 MB/s","ratio":0.784,"goal":"≥ 0.95","n":7,"load":"1.20–2.00"}

{"bench":"density","name":"gateway RSS","value":"80.0 MiB","n":5,"load":"2.00"}
`
	if err := os.WriteFile(path, []byte(lines), 0o644); err != nil {
		t.Fatal(err)
	}
	figs, err := read(path)
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	if err := write(&b, figs); err != nil {
		t.Fatal(err)
	}
	want := `| bench   | figure      | berth    | baseline | ratio | goal   | N | load      |
| ------- | ----------- | -------- | -------- | ----- | ------ | - | --------- |
| tunnel  | bulk copy   | 229 MB/s | 292 MB/s | 0.78  | ≥ 0.95 | 7 | 1.20–2.00 |
| density | gateway RSS | 80.0 MiB |          |       |        | 5 | 2.00      |
`
	if got := b.String(); got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
}

func TestTableOfNoFile(t *testing.T) {
	figs, err := read(filepath.Join(t.TempDir(), "none"))
	if err != nil || figs != nil {
		t.Errorf("read of a missing file: %v, %v; want no figures and no error", figs, err)
	}
}
