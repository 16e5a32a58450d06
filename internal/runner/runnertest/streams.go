package runnertest

import (
	"bufio"
	"os"
	"path/filepath"
	"runtime"
	"testing"
)

// Stream returns the lines of a stream a real agent CLI printed, captured
// in the runner package's testdata/streams (name without .jsonl), for any
// package's tests to replay.
func Stream(t testing.TB, name string) []string {
	t.Helper()
	_, here, _, _ := runtime.Caller(0)
	f, err := os.Open(filepath.Join(filepath.Dir(here), "..", "testdata", "streams", name+".jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var lines []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		lines = append(lines, sc.Text())
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return lines
}
