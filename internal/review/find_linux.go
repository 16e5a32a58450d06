package review

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
)

// The recovery search's bounds: how deep below the checkout it looks, and
// how many directory entries it reads before it gives up. A checkout the
// agent filled with a huge tree costs the host a bounded walk, then a hold.
const (
	maxDepth   = 4
	maxEntries = 20000
)

// find opens the verdict: the checkout's own, or when there is none at
// the root the first one in a sub-directory, shallowest first, then in
// byte order of the path (.git is not searched). A verdict at the root
// that cannot be taken (a symbolic link, say) is not passed over for
// another one. Every step is an openat with O_NOFOLLOW below a descriptor
// of the checkout, so a symbolic link the agent planted, at the end of
// the path or in the middle, is never followed.
func find(checkout string) (*os.File, string, error) {
	root, err := retry(func() (int, error) {
		return syscall.Open(checkout, syscall.O_RDONLY|syscall.O_DIRECTORY|syscall.O_CLOEXEC, 0)
	})
	if err != nil {
		return nil, "", fmt.Errorf("open the checkout: %w", err)
	}
	defer syscall.Close(root)
	f, err := openBeneath(root, checkout, FileName)
	switch {
	case err == nil:
		return f, FileName, nil
	case !errors.Is(err, syscall.ENOENT):
		return nil, FileName, refusal(FileName, err)
	}
	rel, err := search(root, checkout, maxDepth, maxEntries)
	if err != nil {
		return nil, "", err
	}
	if f, err = openBeneath(root, checkout, rel); err != nil {
		return nil, rel, refusal(rel, err)
	}
	return f, rel, nil
}

// search walks the checkout's sub-directories breadth first, each one's
// entries in byte order, down to depth and reading at most entries
// directory entries, and returns the path of the first verdict file it
// meets, whatever its type (find refuses what it cannot take).
func search(root int, checkout string, depth, entries int) (string, error) {
	type dir struct {
		rel   string
		depth int
	}
	queue := []dir{{rel: ".", depth: 0}}
	read := 0
	for len(queue) > 0 {
		d := queue[0]
		queue = queue[1:]
		list, err := readDir(root, checkout, d.rel, entries-read)
		read += len(list)
		if errors.Is(err, errTooMany) {
			return "", fmt.Errorf("no %s at the root of the checkout, and none in the first %d entries below it", FileName, entries)
		}
		if err != nil {
			continue // gone, or not a directory after all: nothing to find there
		}
		slices.SortFunc(list, func(a, b fs.DirEntry) int { return strings.Compare(a.Name(), b.Name()) })
		if d.depth > 0 && slices.ContainsFunc(list, func(e fs.DirEntry) bool { return e.Name() == FileName }) {
			return path.Join(d.rel, FileName), nil
		}
		if d.depth == depth {
			continue
		}
		for _, e := range list {
			// A symbolic link to a directory is a link, not a directory.
			if e.IsDir() && e.Name() != ".git" {
				queue = append(queue, dir{rel: path.Join(d.rel, e.Name()), depth: d.depth + 1})
			}
		}
	}
	return "", fmt.Errorf("no %s in the checkout", FileName)
}

var errTooMany = errors.New("too many directory entries")

// readDir lists the directory rel below root, reading at most limit
// entries; errTooMany when it holds more.
func readDir(root int, checkout, rel string, limit int) ([]fs.DirEntry, error) {
	f, err := openBeneath(root, checkout, rel+"/")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var all []fs.DirEntry
	for {
		batch, err := f.ReadDir(256)
		all = append(all, batch...)
		if len(all) > limit {
			return all[:limit], errTooMany
		}
		if errors.Is(err, io.EOF) || (err == nil && len(batch) == 0) {
			return all, nil
		}
		if err != nil {
			return all, err
		}
	}
}

// openBeneath opens rel, a slash-separated path below the directory root,
// one component at a time, each with O_NOFOLLOW: no symbolic link is
// followed anywhere on the way. A rel ending in "/" (or ".") is opened as
// a directory; anything else read-only and non-blocking, so a FIFO the
// agent left does not hang the host. The file is named by its host path
// (checkout/rel) for messages and directory reads.
func openBeneath(root int, checkout, rel string) (*os.File, error) {
	asDir := strings.HasSuffix(rel, "/") || rel == "."
	parts := strings.FieldsFunc(rel, func(r rune) bool { return r == '/' })
	parts = slices.DeleteFunc(parts, func(p string) bool { return p == "." })
	if len(parts) == 0 {
		// A fresh open, not a dup: a dup would share root's read offset.
		parts = []string{"."}
	}
	fd := root
	for i, p := range parts {
		flags := syscall.O_RDONLY | syscall.O_NOFOLLOW | syscall.O_CLOEXEC
		if i < len(parts)-1 || asDir {
			flags |= syscall.O_DIRECTORY
		} else {
			flags |= syscall.O_NONBLOCK
		}
		next, err := -1, error(nil)
		if p == ".." {
			err = fmt.Errorf("%s: not below the checkout", rel)
		} else {
			next, err = retry(func() (int, error) { return syscall.Openat(fd, p, flags, 0) })
		}
		if fd != root {
			syscall.Close(fd)
		}
		if err != nil {
			return nil, err
		}
		fd = next
	}
	return os.NewFile(uintptr(fd), filepath.Join(checkout, filepath.FromSlash(rel))), nil
}

// retry repeats a system call that was interrupted.
func retry(call func() (int, error)) (int, error) {
	for {
		fd, err := call()
		if !errors.Is(err, syscall.EINTR) {
			return fd, err
		}
	}
}

// refusal says why the verdict at rel is not taken.
func refusal(rel string, err error) error {
	switch {
	case errors.Is(err, syscall.ELOOP), errors.Is(err, syscall.EMLINK):
		return fmt.Errorf("%s is a symbolic link: not followed", rel)
	case errors.Is(err, syscall.ENOTDIR):
		return fmt.Errorf("%s: a directory on its path is not a directory (a symbolic link?): not followed", rel)
	case errors.Is(err, syscall.ENXIO):
		return fmt.Errorf("%s: not a regular file", rel)
	}
	return fmt.Errorf("%s: %v", rel, err)
}

// links is the number of names the file has.
func links(fi os.FileInfo) uint64 {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return uint64(st.Nlink)
	}
	return 1
}
