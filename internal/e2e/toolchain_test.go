package e2e_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"fmt"
	"io/fs"
	mrand "math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// engineerTools are the commands an engineer sandbox's image must carry
// (images/build, ENGINEER_PACKAGES and the base; README, "The sandbox
// image").
var engineerTools = []string{
	"bash", "git", "ssh", "scp", "curl", "wget", "jq", "less", "vi", "nano", "ps",
	"rsync", "make", "cc", "gcc", "g++", "pkg-config", "python3", "pip3",
	"tar", "gzip", "xz", "bzip2", "unzip", "zip", "file", "ss", "ip", "nc",
}

// TestEngineerToolchain: over ssh berth-NAME (the entry berth sandbox
// config writes, the real OpenSSH client) an engineer sandbox has the
// developer's tools, builds C with make, makes a Python venv, and what the
// user installs without root into ~/.local/bin (a script of their own, a
// console script pip install --user makes) runs by name in a new session,
// also after suspend and resume (the home volume keeps it).
func TestEngineerToolchain(t *testing.T) {
	g := startGateway(t)
	alice := g.newMember(t, "alice")
	sb := alice.engineer(g, "tools")
	alice.run(berthBin, "sandbox", "config")
	ssh := func(script string) string {
		t.Helper()
		return alice.run("ssh", append(alice.sshArgs(), "berth-tools", script)...)
	}

	missing := ssh(`for c in ` + strings.Join(engineerTools, " ") + `; do command -v "$c" >/dev/null || printf '%s ' "$c"; done`)
	if missing != "" {
		t.Errorf("the engineer image lacks: %s", missing)
	}

	// A C program built by make; C++ and a venv with its own pip.
	out := ssh(`set -e; mkdir -p c && cd c
printf '#include <stdio.h>\nint main(void) { puts("built by make"); return 0; }\n' >hello.c
printf 'hello: hello.c\n\tcc -O2 -o $@ $<\n' >Makefile
make -s && ./hello
printf '#include <iostream>\nint main() { std::cout << "c++ too" << std::endl; }\n' >hi.cc
g++ -o hi hi.cc && ./hi
python3 -m venv ~/venv && ~/venv/bin/pip --version >/dev/null && ~/venv/bin/python -c 'import sys; print(sys.prefix)'`)
	if got := lines(out); strings.Join(got, "|") != "built by make|c++ too|/home/berth/venv" {
		t.Errorf("make, g++, venv: %q", got)
	}

	// Installs into HOME: a script of the user's own, and a package made
	// here (no index: pip builds it with Debian's setuptools) whose console
	// script pip install --user puts in ~/.local/bin.
	ssh(`set -e; mkdir -p ~/.local/bin
printf '#!/bin/sh\necho mine\n' >~/.local/bin/berth-mine && chmod +x ~/.local/bin/berth-mine
mkdir -p pkg/hellopip && cd pkg
printf '[build-system]\nrequires = ["setuptools"]\nbuild-backend = "setuptools.build_meta"\n[project]\nname = "hellopip"\nversion = "1.0"\n[project.scripts]\nhello-pip = "hellopip:main"\n' >pyproject.toml
printf 'def main():\n    print("installed by pip")\n' >hellopip/__init__.py
python3 -m pip install --user --no-index --no-build-isolation --quiet .`)
	inHome := func(when string) {
		t.Helper()
		// Each its own session, not the one that installed them; a command
		// (PATH from ~/.ssh/environment) and a login shell (~/.profile).
		if got := lines(ssh(`berth-mine; hello-pip; echo "${PATH%%:*}"`)); strings.Join(got, "|") != "mine|installed by pip|/home/berth/.local/bin" {
			t.Errorf("%s: ssh berth-tools berth-mine; hello-pip; first of PATH: %q", when, got)
		}
		if got := strings.TrimSpace(ssh(`env -i HOME=/home/berth bash -lc 'berth-mine && python3 -c "import hellopip; print(hellopip.__file__)"'`)); got != "mine\n/home/berth/.local/lib/python3.11/site-packages/hellopip/__init__.py" {
			t.Errorf("%s: in a login shell: %q", when, got)
		}
	}
	inHome("installed")

	ctx := context.Background()
	if _, err := alice.api.Suspend(ctx, sb.ID); err != nil {
		t.Fatal(err)
	}
	g.waitState(alice.api, sb.ID, "suspended", time.Minute)
	if _, err := alice.api.Resume(ctx, sb.ID); err != nil {
		t.Fatal(err)
	}
	g.waitState(alice.api, sb.ID, "running", 2*time.Minute)
	inHome("after suspend and resume")
}

// TestRsyncThroughSSH is issue 18's acceptance for rsync: rsync -a of a
// 50 MB tree (many small files in nested directories, a few big ones of
// random bytes, a symlink, an executable, an empty directory) into an
// engineer sandbox and back out through ssh berth-NAME, with the real
// OpenSSH client and rsync at both ends; the copy back is the tree, and a
// second run sends only what changed.
func TestRsyncThroughSSH(t *testing.T) {
	if _, err := exec.LookPath("rsync"); err != nil {
		t.Fatal("rsync is not installed on this host (scripts/install-deps --test installs it)")
	}
	g := startGateway(t)
	alice := g.newMember(t, "alice")
	alice.engineer(g, "rs")
	alice.run(berthBin, "sandbox", "config")
	rsh := "ssh " + strings.Join(alice.sshArgs(), " ")
	rsync := func(args ...string) string {
		t.Helper()
		return alice.run("rsync", append([]string{"-a", "-e", rsh}, args...)...)
	}

	tree := filepath.Join(alice.home, "tree")
	size := makeTree(t, tree)
	if size < 50<<20 {
		t.Fatalf("the tree holds %d bytes, want at least 50 MB", size)
	}
	started := time.Now()
	rsync(tree+"/", "berth-rs:tree/")
	in := time.Since(started)

	// What arrived, by the sandbox's own reading.
	remote := alice.run("ssh", append(alice.sshArgs(), "berth-rs", `cd tree && find . -type f | LC_ALL=C sort | xargs -d '\n' sha256sum`)...)
	if want := manifest(t, tree); remote != want {
		t.Errorf("sha256sum of the tree in the sandbox differs from the local tree (%d vs %d bytes of listing)", len(remote), len(want))
	}

	back := filepath.Join(alice.home, "back")
	started = time.Now()
	rsync("berth-rs:tree/", back+"/")
	t.Logf("rsync -a of %d MB: in %v, out %v", size>>20, in.Round(time.Millisecond), time.Since(started).Round(time.Millisecond))
	sameTree(t, tree, back)

	// A change in the sandbox: the next rsync sends that file alone.
	alice.run("ssh", append(alice.sshArgs(), "berth-rs", "echo changed >> tree/d03/e1/f0003.txt")...)
	items := rsync("--itemize-changes", "berth-rs:tree/", back+"/")
	if got := lines(items); len(got) != 1 || !strings.HasSuffix(got[0], " d03/e1/f0003.txt") || !strings.HasPrefix(got[0], ">f") {
		t.Errorf("rsync -ai after one change: %q, want d03/e1/f0003.txt alone", got)
	}
	if b, err := os.ReadFile(filepath.Join(back, "d03/e1/f0003.txt")); err != nil || !bytes.HasSuffix(b, []byte("changed\n")) {
		t.Errorf("d03/e1/f0003.txt after the second rsync: %v", err)
	}
}

// makeTree writes the rsync test's tree under dir and returns its bytes in
// regular files: 2,000 text files of 1-16 KB in 40 directories, four files
// of 9 MB of random bytes, an executable, a symlink and an empty directory.
func makeTree(t *testing.T, dir string) int64 {
	t.Helper()
	var total int64
	write := func(rel string, b []byte, mode os.FileMode) {
		p := filepath.Join(dir, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, b, mode); err != nil {
			t.Fatal(err)
		}
		total += int64(len(b))
	}
	r := mrand.New(mrand.NewPCG(18, 18))
	for i := range 2000 {
		line := fmt.Sprintf("file %d of the tree, line of text\n", i)
		b := bytes.Repeat([]byte(line), (1024+r.IntN(15*1024))/len(line)+1)
		write(fmt.Sprintf("d%02d/e%d/f%04d.txt", i%20, i%2, i), b, 0o644)
	}
	for i := range 4 {
		b := make([]byte, 9<<20)
		rand.Read(b)
		write(fmt.Sprintf("big/blob%d.bin", i), b, 0o600)
	}
	write("bin/run.sh", []byte("#!/bin/sh\necho run\n"), 0o755)
	if err := os.Symlink("../big/blob0.bin", filepath.Join(dir, "bin/blob")); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(dir, "empty"), 0o750); err != nil {
		t.Fatal(err)
	}
	return total
}

// manifest is what `find . -type f | LC_ALL=C sort | xargs sha256sum` prints
// in dir.
func manifest(t *testing.T, dir string) string {
	t.Helper()
	var files []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			rel, _ := filepath.Rel(dir, p)
			files = append(files, "./"+rel)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(files)
	var b strings.Builder
	for _, f := range files {
		data, err := os.ReadFile(filepath.Join(dir, f))
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&b, "%x  %s\n", sha256.Sum256(data), f)
	}
	return b.String()
}

// sameTree checks that got is want as rsync -a copies it: the same
// entries, types, permissions, modification times (to the second),
// contents and symlink targets.
func sameTree(t *testing.T, want, got string) {
	t.Helper()
	type entry struct {
		mode  fs.FileMode
		mtime int64
		sum   string
	}
	read := func(root string) map[string]entry {
		m := map[string]entry{}
		err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			if err != nil || p == root {
				return err
			}
			info, err := d.Info()
			if err != nil {
				return err
			}
			rel, _ := filepath.Rel(root, p)
			e := entry{mode: info.Mode()}
			switch {
			case info.Mode().IsRegular():
				data, err := os.ReadFile(p)
				if err != nil {
					return err
				}
				e.sum = fmt.Sprintf("%x", sha256.Sum256(data))
				e.mtime = info.ModTime().Unix()
			case info.Mode()&fs.ModeSymlink != 0:
				e.sum, err = os.Readlink(p)
				if err != nil {
					return err
				}
			default:
				e.mtime = info.ModTime().Unix()
			}
			m[rel] = e
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	w, g := read(want), read(got)
	for name, we := range w {
		ge, ok := g[name]
		switch {
		case !ok:
			t.Errorf("%s did not come back", name)
		case ge != we:
			t.Errorf("%s came back as %v, want %v", name, ge, we)
		}
	}
	for name := range g {
		if _, ok := w[name]; !ok {
			t.Errorf("%s came back but was not sent", name)
		}
	}
}
