//go:build !linux

package entrypoint_test

// processDumpable is false where berth-init has nothing to set.
func processDumpable() bool { return false }
