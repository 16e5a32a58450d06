package podman

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"berth.dev/berth/internal/quantity"
	"berth.dev/berth/internal/sandbox"
)

// Fork on the isolated tier (SPEC S3, beyond the seeds): a running
// engineer's machine is saved with runsc while it runs on, and each fork
// is a container of its own, made (not started) on a copy of the source's
// volume, whose save is its checkpoint. Its start is then a restore, as a
// resume from memory is (checkpoint.go's wrapper), and a restored fork's
// HOME is told its own name and key (refreshHome).
//
// The source is paused from just before the save until its volume is
// copied, so what the save holds in memory and what the copy holds on
// disk are of one instant: a process that wrote a file after the save
// would find it in a fork's memory but not on its disk.

// forkMark is the file beside a checkpoint that says it is a fork's: the
// restored machine's HOME still holds its source's name and key.
const forkMark = "fork"

var _ sandbox.Forker = (*Driver)(nil)

// Fork saves the running machine of src and makes one machine per spec
// from the save and a copy of src's volume; each one's Restore starts it.
func (d *Driver) Fork(ctx context.Context, src sandbox.ID, specs []sandbox.Spec) (size quantity.Bytes, err error) {
	if len(specs) == 0 {
		return 0, errors.New("podman: a fork needs at least one sandbox to make")
	}
	d.forgetAddrs()
	defer d.forgetAddrs()
	name := d.nameOf(src)
	cur, err := d.inspectName(ctx, name)
	if err != nil {
		return 0, err
	}
	if !cur.State.Running {
		return 0, fmt.Errorf("podman: %s does not run (%s)", src, cur.State.Status)
	}
	if !gvisor(d.cfg.Runtimes[cur.OCIRuntime]) || len(cur.ID) != 64 {
		return 0, fmt.Errorf("podman: %s runs on %s, which cannot save its memory", src, cur.OCIRuntime)
	}
	defer func() {
		if err == nil {
			return
		}
		// Nothing of the forks is left: their containers, volumes and
		// saves go, whatever ctx says.
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
		defer cancel()
		for _, spec := range specs {
			if rerr := d.Remove(cctx, spec.Sandbox.ID); rerr != nil {
				d.log.WarnContext(ctx, "a fork that failed was not removed", "sandbox", spec.Sandbox.ID, "err", rerr)
			}
		}
	}()
	from, err := d.mountpoint(ctx, name)
	if err != nil {
		return 0, err
	}
	homes := make([]string, len(specs))
	for i, spec := range specs {
		if err := d.makeVolume(ctx, spec.Sandbox); err != nil {
			return 0, err
		}
		if homes[i], err = d.mountpoint(ctx, d.cfg.name(spec.Sandbox.ID)); err != nil {
			return 0, err
		}
	}
	first := d.cfg.name(specs[0].Sandbox.ID)
	save := d.cfg.imageDir(first)
	if err := os.MkdirAll(filepath.Dir(save), 0o700); err != nil {
		return 0, fmt.Errorf("podman: fork of %s: %w", src, err)
	}
	if err := d.saveRunning(ctx, name, cur, save, from, homes[0]); err != nil {
		return 0, fmt.Errorf("podman: fork of %s: %w", src, err)
	}
	if size, err = dirSize(save); err != nil {
		return 0, fmt.Errorf("podman: fork of %s: %w", src, err)
	}
	// The source runs again; the other forks' homes are copied from the
	// first's, and every container is made at once.
	errs := make([]error, len(specs))
	var wg sync.WaitGroup
	for i, spec := range specs {
		wg.Go(func() {
			if i > 0 {
				if err := copyHome(ctx, homes[0], homes[i]); err != nil {
					errs[i] = err
					return
				}
				if err := linkSave(save, d.cfg.imageDir(d.cfg.name(spec.Sandbox.ID))); err != nil {
					errs[i] = err
					return
				}
			}
			mark := filepath.Join(filepath.Dir(d.cfg.imageDir(d.cfg.name(spec.Sandbox.ID))), forkMark)
			if err := os.WriteFile(mark, []byte(src), 0o600); err != nil {
				errs[i] = err
				return
			}
			defer d.making.lock(spec.Sandbox.ID)()
			errs[i] = d.makeMachine(ctx, spec, false)
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return 0, fmt.Errorf("podman: fork of %s: %w", src, err)
	}
	return size, nil
}

// saveRunning saves the container called name (cur) into dir and copies
// its volume's data (from) to the fork's (to), the container paused
// throughout; it runs on afterwards whatever happened.
func (d *Driver) saveRunning(ctx context.Context, name string, cur inspected, dir, from, to string) error {
	d.mu.Lock()
	if d.forking[name] {
		d.mu.Unlock()
		return errors.New("another fork of it is under way")
	}
	if d.forking == nil {
		d.forking = map[string]bool{}
	}
	d.forking[name] = true
	d.mu.Unlock()
	defer func() {
		d.mu.Lock()
		delete(d.forking, name)
		d.mu.Unlock()
	}()
	if _, err := d.run(ctx, nil, "pause", name); err != nil {
		return err
	}
	defer func() {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
		defer cancel()
		if _, err := d.run(cctx, nil, "unpause", name); err != nil {
			d.log.WarnContext(ctx, "a forked machine was not unpaused", "container", name, "err", err)
		}
	}()
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	if _, err := d.runtime(ctx, d.cfg.runtimePath(cur.OCIRuntime), "checkpoint", "--leave-running", "--image-path", dir, cur.ID); err != nil {
		return err
	}
	return copyHome(ctx, from, to)
}

// forkingNow reports whether a fork in this process holds the container
// called name paused.
func (d *Driver) forkingNow(name string) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.forking[name]
}

// makeVolume makes the home volume of sb.
func (d *Driver) makeVolume(ctx context.Context, sb sandbox.Sandbox) error {
	if ok, err := d.serviceVolume(ctx, d.cfg.name(sb.ID), d.cfg.labelMap(sb)); ok {
		return err
	}
	if _, err := d.run(ctx, nil, VolumeArgs(d.cfg, sb)...); err != nil && !alreadyExists(err) {
		return err
	}
	return nil
}

// mountpoint is where the data of the volume called name is on the host.
func (d *Driver) mountpoint(ctx context.Context, name string) (string, error) {
	out, err := d.run(ctx, nil, "volume", "inspect", "--format", "{{.Mountpoint}}", name)
	if err != nil {
		return "", err
	}
	dir := strings.TrimSpace(string(out))
	if !filepath.IsAbs(dir) {
		return "", fmt.Errorf("podman volume inspect %s: unexpected mountpoint %q", name, dir)
	}
	return dir, nil
}

// copyHome copies the volume data directory from into to, whole or not
// at all: the copy is made beside to and swapped in at once, so a gateway
// killed half-way never leaves half a home.
func copyHome(ctx context.Context, from, to string) error {
	next := to + ".fork"
	if err := os.RemoveAll(next); err != nil {
		return err
	}
	cmd := exec.CommandContext(ctx, "cp", "-a", "--reflink=auto", "--", from, next)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		_ = os.RemoveAll(next)
		return fmt.Errorf("copy of the home: %v: %s", err, strings.TrimSpace(stderr.String()))
	}
	if err := unix.Renameat2(unix.AT_FDCWD, next, unix.AT_FDCWD, to, unix.RENAME_EXCHANGE); err != nil {
		_ = os.RemoveAll(next)
		return fmt.Errorf("copy of the home: swap: %w", err)
	}
	return os.RemoveAll(next) // the empty home it replaced
}

// linkSave hard-links the files of the save in dir into to: the forks
// share one save on disk, and each removes its own links.
func linkSave(dir, to string) error {
	if err := os.RemoveAll(to); err != nil {
		return err
	}
	return filepath.WalkDir(dir, func(path string, e os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(dir, path)
		if err != nil {
			return err
		}
		target := filepath.Join(to, rel)
		if e.IsDir() {
			return os.MkdirAll(target, 0o700)
		}
		return os.Link(path, target)
	})
}

// forked reports whether the checkpoint of the container called name is a
// fork's.
func (d *Driver) forked(name string) bool {
	_, err := os.Stat(filepath.Join(d.cfg.checkpointDir(), name, forkMark))
	return err == nil
}

// refreshHome has berth-init in the restored fork called name rewrite the
// files of its HOME that hold the sandbox's name and key (authorized
// keys, the ssh sessions' and shells' environment) from the fork's own
// environment, which podman exec gives it; the restored processes hold
// the source's.
func (d *Driver) refreshHome(ctx context.Context, name string) error {
	out, err := d.run(ctx, nil, "container", "inspect", "--format", "{{json .Config.Entrypoint}}", name)
	if err != nil {
		return err
	}
	entry, err := entrypointOf(out)
	if err != nil {
		return fmt.Errorf("podman inspect %s: %w", name, err)
	}
	if _, err := d.run(ctx, nil, "exec", name, entry, refreshHomeArg); err != nil {
		return err
	}
	return nil
}

// refreshHomeArg is berth-init's argument to rewrite HOME's environment
// files and exit (entrypoint.RefreshHomeArg; the driver imports nothing of
// the in-sandbox program).
const refreshHomeArg = "--berth-refresh-home"

// entrypointOf is the program of a container's entrypoint as podman inspect
// prints it: a string in podman 4, a list in podman 5.
func entrypointOf(out []byte) (string, error) {
	out = bytes.TrimSpace(out)
	var list []string
	if err := json.Unmarshal(out, &list); err == nil {
		if len(list) == 0 || list[0] == "" {
			return "", errors.New("the container has no entrypoint")
		}
		return list[0], nil
	}
	var s string
	if err := json.Unmarshal(out, &s); err != nil {
		return "", fmt.Errorf("unexpected entrypoint %q", out)
	}
	if f := strings.Fields(s); len(f) > 0 {
		return f[0], nil
	}
	return "", errors.New("the container has no entrypoint")
}
