package sso

// SetRefreshBatch sets how many sessions a refresh pass reads at a time,
// for the test's life.
func SetRefreshBatch(t interface{ Cleanup(func()) }, n int) {
	old := refreshBatch
	refreshBatch = n
	t.Cleanup(func() { refreshBatch = old })
}
