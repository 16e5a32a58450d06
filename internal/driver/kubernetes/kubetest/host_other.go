//go:build !linux

package kubetest

import (
	"errors"
	"io/fs"
)

func mountTmpfs(string, int64) error { return errors.New("emptyDir medium Memory needs Linux") }

func unmountTmpfs(string) error { return nil }

func fileGID(fs.FileInfo) (int64, bool) { return 0, false }
