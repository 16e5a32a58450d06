package main

import (
	"os"
	"path/filepath"
	"testing"
)

func TestMemoryCgroup(t *testing.T) {
	for _, c := range []struct {
		name, proc, dir string
		v1              bool
	}{
		{"hybrid, as runc puts a container here", `9:name=systemd:/libpod_parent/libpod-0e5a
4:memory:/libpod_parent/libpod-0e5a
3:cpuset:/libpod_parent/libpod-0e5a
0::/libpod_parent/libpod-0e5a
`, "/sys/fs/cgroup/memory/libpod_parent/libpod-0e5a", true},
		{"v1, controllers joined", "5:cpu,memory:/a\n", "/sys/fs/cgroup/memory/a", true},
		{"v2 only", "0::/machine/ctr\n", "/sys/fs/cgroup/machine/ctr", false},
	} {
		dir, v1, err := memoryCgroup(c.proc)
		if err != nil || dir != c.dir || v1 != c.v1 {
			t.Errorf("%s: %q, v1 %v, %v; want %q, v1 %v", c.name, dir, v1, err, c.dir, c.v1)
		}
	}
	if _, _, err := memoryCgroup("3:cpuset:/a\n"); err == nil {
		t.Error("no memory line: no error")
	}
}

func TestKBField(t *testing.T) {
	path := filepath.Join(t.TempDir(), "status")
	if err := os.WriteFile(path, []byte("Name:\tconmon\nVmRSS:\t    2196 kB\nRssAnon:\t  344 kB\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got, err := kbField(path, "VmRSS"); err != nil || got != 2196*1024 {
		t.Errorf("VmRSS: %v, %v; want %d", got, err, 2196*1024)
	}
	if _, err := kbField(path, "Pss"); err == nil {
		t.Error("a missing field: no error")
	}
}
