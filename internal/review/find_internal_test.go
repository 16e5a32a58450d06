//go:build linux

package review

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// TestSearchIsBounded: a checkout the agent filled with a huge tree costs
// a bounded walk, then a hold; the bound is lowered here so the test stays
// small.
func TestSearchIsBounded(t *testing.T) {
	checkout := t.TempDir()
	for i := range 30 {
		dir := filepath.Join(checkout, "d"+strconv.Itoa(i))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(checkout, "d29", FileName), []byte(`{"verdict":"approve"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	root, err := syscall.Open(checkout, syscall.O_RDONLY|syscall.O_DIRECTORY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer syscall.Close(root)
	if _, err := search(root, checkout, maxDepth, 20); err == nil || !strings.Contains(err.Error(), "first 20 entries") {
		t.Errorf("search with 20 entries allowed = %v, want it to give up", err)
	}
	got, err := search(root, checkout, maxDepth, 100)
	if err != nil || got != "d29/"+FileName {
		t.Errorf("search with 100 entries allowed = %q, %v; want d29's verdict", got, err)
	}
}
