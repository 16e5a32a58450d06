//go:build !linux

package entrypoint

// dirChanges has nothing to watch with here: the poll alone finds the token.
func dirChanges(dir string) (changes <-chan struct{}, stop func()) { return nil, func() {} }
