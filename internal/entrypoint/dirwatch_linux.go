package entrypoint

import (
	"os"
	"syscall"
)

// dirChanges receives when something is created, renamed into, or
// written in dir (inotify): a claim's token arrives at once rather than
// at the next poll. It is nil where dir cannot be watched; the poll goes
// on either way. stop ends the watch.
func dirChanges(dir string) (changes <-chan struct{}, stop func()) {
	fd, err := syscall.InotifyInit1(syscall.IN_CLOEXEC | syscall.IN_NONBLOCK)
	if err != nil {
		return nil, func() {}
	}
	if _, err := syscall.InotifyAddWatch(fd, dir, syscall.IN_CREATE|syscall.IN_MOVED_TO|syscall.IN_CLOSE_WRITE); err != nil {
		_ = syscall.Close(fd)
		return nil, func() {}
	}
	f := os.NewFile(uintptr(fd), "inotify "+dir)
	ch := make(chan struct{}, 1)
	go func() {
		buf := make([]byte, 4096)
		for {
			if _, err := f.Read(buf); err != nil {
				return
			}
			select {
			case ch <- struct{}{}:
			default:
			}
		}
	}()
	return ch, func() { _ = f.Close() }
}
