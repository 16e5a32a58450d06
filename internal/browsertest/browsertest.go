// Package browsertest starts headless Chromium for the tests that drive
// a page as a person would (the panel, the terminal, the editor): the
// binary BERTH_TEST_CHROMIUM names, else a skip; flags that let it start
// as root in CI; and the directory its screenshots go to. Tests only.
package browsertest

import (
	"context"
	"os"
	"sync"
	"testing"

	"github.com/chromedp/chromedp"
)

// Allocator is an allocator for Chromium with a window of width×height and
// the extra options, ended with the test. Without BERTH_TEST_CHROMIUM the
// test is skipped, saying how to run it.
func Allocator(t testing.TB, width, height int, extra ...chromedp.ExecAllocatorOption) context.Context {
	t.Helper()
	bin := os.Getenv("BERTH_TEST_CHROMIUM")
	if bin == "" {
		t.Skip("set BERTH_TEST_CHROMIUM to a chromium binary (apt-get install chromium) to run the browser tests")
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(bin),
		chromedp.NoSandbox, // CI runs as root, where Chromium's own sandbox will not start
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.WindowSize(width, height),
	)
	alloc, cancel := chromedp.NewExecAllocator(context.Background(), append(opts, extra...)...)
	t.Cleanup(cancel)
	return alloc
}

var (
	shotsOnce sync.Once
	shotsDir  string
	shotsErr  error
)

// Screenshots is where screenshots go: BERTH_TEST_SCREENSHOTS, else one
// new temporary directory for the test binary, named in the log.
func Screenshots(t testing.TB) string {
	t.Helper()
	shotsOnce.Do(func() {
		if shotsDir = os.Getenv("BERTH_TEST_SCREENSHOTS"); shotsDir == "" {
			shotsDir, shotsErr = os.MkdirTemp("", "berth-screenshots-")
		}
		if shotsErr == nil {
			shotsErr = os.MkdirAll(shotsDir, 0o755)
		}
	})
	if shotsErr != nil {
		t.Fatal(shotsErr)
	}
	t.Logf("screenshots in %s", shotsDir)
	return shotsDir
}
