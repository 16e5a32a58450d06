package kubetest

import (
	"io/fs"
	"strconv"
	"syscall"
)

// mountTmpfs mounts a tmpfs at dir, as a kubelet does for an emptyDir of
// medium Memory: only its size set (none: the kernel's default), so its
// root is 1777.
func mountTmpfs(dir string, size int64) error {
	opts := ""
	if size > 0 {
		opts = "size=" + strconv.FormatInt(size, 10)
	}
	return syscall.Mount("tmpfs", dir, "tmpfs", syscall.MS_NOSUID|syscall.MS_NODEV, opts)
}

func unmountTmpfs(dir string) error { return syscall.Unmount(dir, syscall.MNT_DETACH) }

func fileGID(info fs.FileInfo) (int64, bool) {
	st, ok := info.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, false
	}
	return int64(st.Gid), true
}
