package podman

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"berth.dev/berth/internal/quantity"
	"berth.dev/berth/internal/sandbox"
)

// Suspend with memory on the isolated tier (SPEC S3): gVisor's runsc saves
// a running sandbox (memory, processes, open files, the root
// filesystem's writes, which gVisor keeps in memory) into a directory and
// restores it later. podman 4.3 drives checkpoints only through CRIU,
// which fails on this kind of kernel and knows nothing of gVisor, so
// berth calls runsc itself and keeps podman's view true:
//
//   - checkpoint: runsc checkpoint of the running container, which ends
//     it; podman sees it exit 0, as after a stop. Then podman's init
//     makes the container again without starting it (the standby): its
//     network, its conmon and runsc's sandbox, which waits in runsc's
//     "created". Making them is most of a start's time (measured: about
//     145 ms of podman's and 200 ms of runsc's on 2 cores), so the
//     suspended machine is kept made, for 20–30 MiB of the host's memory.
//   - restore: podman starts the waiting container as ever, and the
//     runtime it runs is a wrapper berth writes (runscWrapper): when a
//     note for the container links to a checkpoint, podman's "start"
//     becomes runsc's "restore --detach --background", which restores the
//     checkpoint into the waiting sandbox and starts it (its memory's
//     pages loading on after it returns: the checkpoint is uncompressed,
//     runsc's default). A standby that is gone (a reboot, a stop by hand)
//     is made by podman's start first, with runsc's plain create.
//
// podman thus owns the container's whole life (its network, its mounts,
// its exit), which a restore behind its back would not survive: the next
// podman start fails on a container the runtime already has, and its
// clean-up kills the sandbox (measured). The wrapper also gives runsc a
// state directory of berth's own and pins its platform: a checkpoint
// restores only on the platform it was made on (another "restores" and
// dies at once).

// gvisor reports whether bin is gVisor's runsc.
func gvisor(bin string) bool { return filepath.Base(bin) == "runsc" }

// runtimePath is what podman runs for the configured runtime name: the
// wrapper for runsc, else the binary itself.
func (c Config) runtimePath(name string) string {
	if gvisor(c.Runtimes[name]) {
		return filepath.Join(c.StateDir, "runtimes", name)
	}
	return c.Runtimes[name]
}

// checkpointDir holds one directory per checkpointed container, named as
// the container, and the notes the wrapper reads, named by container id.
func (c Config) checkpointDir() string { return filepath.Join(c.StateDir, "checkpoints") }

// imageDir is where the checkpoint of the container called name is.
func (c Config) imageDir(name string) string { return filepath.Join(c.checkpointDir(), name, "image") }

// noteOf is the note that tells the wrapper to restore the container
// whose full id is full: a link to its checkpoint. A dangling one (the
// checkpoint was dropped) restores nothing.
func (c Config) noteOf(full string) string { return filepath.Join(c.checkpointDir(), full+".restore") }

// noteTarget is what a note of the container called name links to,
// relative to the notes' directory.
func noteTarget(name string) string { return filepath.Join(name, "image") }

// linkNote leaves the note that the container full, called name, is to
// be restored from its checkpoint at its next start.
func (c Config) linkNote(full, name string) error {
	note := c.noteOf(full)
	if err := os.Remove(note); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return os.Symlink(noteTarget(name), note)
}

// notesOf lists the notes that link to the checkpoint of the container
// called name: one, unless the container was made again since.
func (c Config) notesOf(name string) []string {
	all, _ := filepath.Glob(filepath.Join(c.checkpointDir(), "*.restore"))
	var notes []string
	for _, n := range all {
		if to, err := os.Readlink(n); err == nil && to == noteTarget(name) {
			notes = append(notes, n)
		}
	}
	return notes
}

// runscWrapper is the script podman runs as the runtime name whose binary
// is runsc. Paths are quoted for sh; writeRuntimes refuses one with a
// quote in it.
func (c Config) runscWrapper(name string) string {
	return fmt.Sprintf(`#!/bin/sh
# Written by berth at every start: the %[1]s runtime, gVisor's runsc with a
# state directory of berth's own and a pinned platform (a checkpoint
# restores only on the platform it was made on). A suspended sandbox waits
# made (runsc's create); berth leaves a note, named by the container's id,
# linking to its checkpoint: podman's start of that container is then
# runsc's restore into the waiting sandbox, and the note is spent.
runsc='%[2]s'
notes='%[3]s'
set -- --root='%[4]s' --platform=systrap "$@"
cmd= id=
for a do
	if [ -z "$cmd" ]; then
		case $a in create|start) cmd=$a ;; esac
	fi
	id=$a
done
case $id in */*|.*|'') exec "$runsc" "$@" ;; esac
if [ "$cmd" = start ] && [ -d "$notes/$id.restore" ]; then
	done=
	for a do
		shift
		if [ -z "$done" ] && [ "$a" = start ]; then
			set -- "$@" restore --detach --background --image-path "$notes/$id.restore"
			done=1
		else
			set -- "$@" "$a"
		fi
	done
	"$runsc" "$@" || exit
	rm -f "$notes/$id.restore"
	exit 0
fi
exec "$runsc" "$@"
`, name, c.Runtimes[name], c.checkpointDir(), filepath.Join(c.StateDir, "runsc"))
}

// writeRuntimes writes the wrapper of every runsc runtime.
func (c Config) writeRuntimes() error {
	for name, bin := range c.Runtimes {
		if !gvisor(bin) {
			continue
		}
		for _, p := range []string{bin, c.StateDir} {
			if strings.ContainsAny(p, "'\n") {
				return fmt.Errorf("podman state: the path %q has a quote or a line break, which the runtime's wrapper cannot hold", p)
			}
		}
		for _, dir := range []string{filepath.Join(c.StateDir, "runtimes"), c.checkpointDir(), filepath.Join(c.StateDir, "runsc")} {
			if err := os.MkdirAll(dir, 0o700); err != nil {
				return fmt.Errorf("podman state: %w", err)
			}
		}
		path := c.runtimePath(name)
		if err := replaceFile(path, []byte(c.runscWrapper(name))); err != nil {
			return fmt.Errorf("podman state: %w", err)
		}
		if err := os.Chmod(path, 0o700); err != nil {
			return fmt.Errorf("podman state: %w", err)
		}
	}
	return nil
}

// Checkpoints says whether sb's machine can be suspended with its memory:
// an engineer's machine on a runsc runtime can.
func (d *Driver) Checkpoints(sb sandbox.Sandbox) string {
	if sb.Purpose != sandbox.PurposeEngineer {
		return "an agent's machine is stopped between tasks, never saved"
	}
	if !d.checkpoints(sb) {
		return "its runtime cannot save a machine's memory (gVisor's, the isolated tier's, can)"
	}
	return ""
}

// Checkpoint saves the running machine of id with runsc and stops it.
func (d *Driver) Checkpoint(ctx context.Context, id sandbox.ID) (quantity.Bytes, error) {
	d.forgetAddrs()
	defer d.forgetAddrs()
	name := d.nameOf(id)
	full, rt, err := d.containerID(ctx, name)
	if err != nil {
		return 0, err
	}
	if !gvisor(d.cfg.Runtimes[rt]) {
		return 0, fmt.Errorf("podman: %s runs on %s, which cannot save its memory", id, rt)
	}
	dir := d.cfg.imageDir(name)
	if err := os.MkdirAll(filepath.Dir(dir), 0o700); err != nil {
		return 0, fmt.Errorf("podman: checkpoint of %s: %w", id, err)
	}
	if err := os.RemoveAll(dir); err != nil {
		return 0, fmt.Errorf("podman: checkpoint of %s: %w", id, err)
	}
	if _, err := d.runtime(ctx, d.cfg.runtimePath(rt), "checkpoint", "--image-path", dir, full); err != nil {
		_ = os.RemoveAll(dir)
		return 0, fmt.Errorf("podman: checkpoint of %s: %w", id, err)
	}
	size, err := dirSize(dir)
	if err != nil {
		_ = os.RemoveAll(dir)
		return 0, fmt.Errorf("podman: checkpoint of %s: %w", id, err)
	}
	// runsc has ended the sandbox; podman's stop returns once podman has
	// seen it exit (its conmon), so the next start finds it stopped.
	if _, err := d.run(ctx, nil, "stop", "--time", "1", name); err != nil && !noSuch(err) {
		_ = os.RemoveAll(dir)
		return 0, err
	}
	if err := d.cfg.linkNote(full, name); err != nil {
		_ = os.RemoveAll(dir)
		return 0, fmt.Errorf("podman: checkpoint of %s: %w", id, err)
	}
	// The standby: the container made again, waiting for the restore. A
	// resume without it makes it first, as after a reboot.
	if d.cfg.Standby > 0 {
		err := settle(ctx, full, 10*time.Second)
		if err == nil {
			err = d.initContainer(ctx, name)
		}
		if err != nil {
			d.log.WarnContext(ctx, "a suspended machine was not made ready for its resume: the resume will make it", "sandbox", id, "err", err)
		}
	}
	return size, nil
}

// settle waits, at most within, until podman is done with the exit a
// checkpoint caused: the container's old conmon gone, and the clean-up
// conmon starts at an exit (`podman container cleanup ID`, its exit
// command) ended. podman's stop may return before that clean-up runs;
// one that runs after podman's init deletes the standby from runsc and
// leaves podman's container unmade (measured under CI's load: `runsc
// state` found nothing, and the resume made the container again).
func settle(ctx context.Context, full string, within time.Duration) error {
	end := time.Now().Add(within)
	for pendingExit(full) {
		if time.Now().After(end) {
			return fmt.Errorf("podman still handles the checkpoint's exit after %s", within)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(5 * time.Millisecond):
		}
	}
	return nil
}

// pendingExit reports whether a process of the host still handles the
// exit of the container whose full id is full: its conmon, or a clean-up
// of it.
func pendingExit(full string) bool {
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, p := range procs {
		b, err := os.ReadFile(p)
		if err != nil || !strings.Contains(string(b), full) {
			continue // gone, or not about this container
		}
		args := strings.Split(string(b), "\x00")
		if filepath.Base(args[0]) == "conmon" || slices.Contains(args, "cleanup") {
			return true
		}
	}
	return false
}

// waiting reports whether podman's status of a container says it is made
// and not started: podman's init (a standby) made it.
func waiting(status string) bool { return status == "initialized" }

// tidyStandbys lets go the standbys of this deployment's machines that
// have waited longer than cfg.Standby (every one, when it keeps none):
// each is stopped, so its conmon and runsc's sandbox end and their memory
// is the host's again. The checkpoint and its note stay: the resume makes
// the container before it restores, as after a reboot. It returns the
// names it let go.
func (d *Driver) tidyStandbys(ctx context.Context) ([]string, error) {
	notes, _ := filepath.Glob(filepath.Join(d.cfg.checkpointDir(), "*.restore"))
	due := map[string]bool{} // by full container id
	for _, n := range notes {
		if fi, err := os.Lstat(n); err == nil && (d.cfg.Standby <= 0 || time.Since(fi.ModTime()) >= d.cfg.Standby) {
			due[strings.TrimSuffix(filepath.Base(n), ".restore")] = true
		}
	}
	if len(due) == 0 {
		return nil, nil // no podman call on a sweep with nothing to let go
	}
	out, err := d.run(ctx, nil, "ps", "--all", "--no-trunc", "--filter", "label="+labelDeployment+"="+d.cfg.Deployment, "--format", "json")
	if err != nil {
		return nil, err
	}
	var cs []listed
	if err := json.Unmarshal(orEmpty(out), &cs); err != nil {
		return nil, fmt.Errorf("podman ps: unexpected answer: %w", err)
	}
	var gone []string
	var errs []error
	for _, c := range cs {
		if !due[c.ID] || !waiting(c.State) || len(c.Names) == 0 {
			continue
		}
		id := sandbox.ID(c.Labels[labelSandbox])
		if id == "" {
			id, _ = d.claimedBy(c.Names[0])
		}
		if id == "" {
			continue
		}
		switch ok, err := d.letGo(ctx, id, c.Names[0], c.ID); {
		case err != nil:
			errs = append(errs, err)
		case ok:
			d.log.InfoContext(ctx, "a suspended machine's standby let go: its resume will make its container", "sandbox", id, "waited", d.cfg.Standby)
			gone = append(gone, c.Names[0])
		}
	}
	return gone, errors.Join(errs...)
}

// letGo stops the standby of id (the container name, full id full)
// unless a resume took it meanwhile: under the machine's lock, which
// Restore holds, its note must still be there and the container still
// waiting. (Another gateway on the same podman root resuming it at this
// instant is not seen: podman has no stop-if-waiting.)
func (d *Driver) letGo(ctx context.Context, id sandbox.ID, name, full string) (bool, error) {
	defer d.making.lock(id)()
	if _, err := os.Lstat(d.cfg.noteOf(full)); err != nil {
		return false, nil
	}
	cur, err := d.inspectName(ctx, name)
	if err != nil || cur.ID != full || !waiting(cur.State.Status) {
		return false, nil
	}
	if _, err := d.run(ctx, nil, "stop", "--time", "1", name); err != nil && !noSuch(err) {
		return false, err
	}
	return true, nil
}

// containerID returns the full id of the container called name and the
// runtime name it runs on.
func (d *Driver) containerID(ctx context.Context, name string) (id, runtime string, err error) {
	cur, err := d.inspectName(ctx, name)
	if err != nil {
		return "", "", err
	}
	if len(cur.ID) != 64 || cur.OCIRuntime == "" {
		return "", "", fmt.Errorf("podman inspect %s: unexpected id %q and runtime %q", name, cur.ID, cur.OCIRuntime)
	}
	return cur.ID, cur.OCIRuntime, nil
}

// Restore starts the machine of spec from its checkpoint; when it cannot,
// from its volume (cold says why). The checkpoint is gone afterwards.
func (d *Driver) Restore(ctx context.Context, spec sandbox.Spec) (cold string, err error) {
	sb := spec.Sandbox
	name := d.nameOf(sb.ID)
	fork := d.forked(name)
	release := d.making.lock(sb.ID) // Tidy lets no standby go under a restore
	cold = d.restore(ctx, spec, d.cfg.imageDir(name))
	release()
	if cold == "" && fork {
		// A fork's HOME still names its source: until it names the fork,
		// a new ssh session would get the source's name and key.
		if err := d.refreshHome(ctx, name); err != nil {
			cold = "restored, its HOME could not be given its own name and key: " + said(errorText(err))
			if _, serr := d.run(context.WithoutCancel(ctx), nil, "stop", "--time", "1", name); serr != nil && !noSuch(serr) {
				d.log.WarnContext(ctx, "a restored fork that was not refreshed did not stop", "sandbox", sb.ID, "err", serr)
			}
		}
	}
	if cold == "" {
		d.dropCheckpoint(name)
		return "", nil
	}
	d.log.WarnContext(ctx, "sandbox not restored from its checkpoint: starting it from its volume", "sandbox", sb.ID, "why", cold)
	return cold, d.Start(ctx, spec) // Start drops the checkpoint
}

// restore is Restore's attempt from the checkpoint in dir: "" when the
// machine is restored and ready, else why not, with the machine stopped.
func (d *Driver) restore(ctx context.Context, spec sandbox.Spec, dir string) string {
	d.forgetAddrs()
	defer d.forgetAddrs()
	name := d.nameOf(spec.Sandbox.ID)
	if _, err := os.Stat(filepath.Join(dir, "checkpoint.img")); err != nil {
		return "its checkpoint is missing"
	}
	stop := func(why string) {
		if _, err := d.run(context.WithoutCancel(ctx), nil, "stop", "--time", "1", name); err != nil && !noSuch(err) {
			d.log.WarnContext(ctx, why+" did not stop", "sandbox", spec.Sandbox.ID, "err", err)
		}
	}
	// The checkpoint's note names the container's id: with it there, the
	// resume asks podman nothing before its start.
	var note string
	if notes := d.cfg.notesOf(name); len(notes) == 1 {
		note = notes[0]
	} else {
		full, rt, err := d.containerID(ctx, name)
		if err != nil {
			return "its container cannot be read: " + err.Error()
		}
		if !gvisor(d.cfg.Runtimes[rt]) {
			return "its runtime is " + rt + " now"
		}
		for _, n := range notes {
			_ = os.Remove(n)
		}
		note = d.cfg.noteOf(full)
		if err := d.cfg.linkNote(full, name); err != nil {
			return "its restore could not be prepared: " + err.Error()
		}
	}
	defer os.Remove(note)
	if err := d.startContainer(ctx, name); err != nil {
		// Whatever runsc left waiting goes: the cold start makes it anew.
		stop("a machine whose restore failed")
		return "runsc did not restore it: " + said(errorText(err))
	}
	if _, err := os.Lstat(note); err == nil {
		// podman started it without the wrapper's restore: its runtime
		// is no longer berth's runsc wrapper, and it booted afresh.
		stop("a machine started without its restore")
		return "its runtime did not restore it: it started afresh"
	}
	if err := d.waitReady(ctx, spec.Sandbox); err != nil {
		// Restored, but not ready: stop it for the cold start.
		stop("a restored machine that is not ready")
		return "restored, it did not become ready: " + err.Error()
	}
	return ""
}

func errorText(err error) string {
	var pe *podmanError
	if errors.As(err, &pe) {
		return pe.stderr
	}
	return err.Error()
}

// dropCheckpoint removes the checkpoint of the container called name and
// any note left for it: a machine started, stopped or removed by other
// means than Restore has none to keep.
func (d *Driver) dropCheckpoint(name string) {
	for _, n := range d.cfg.notesOf(name) {
		if err := os.Remove(n); err != nil && !errors.Is(err, fs.ErrNotExist) {
			d.log.Warn("checkpoint's note not removed", "container", name, "err", err)
		}
	}
	if err := os.RemoveAll(filepath.Join(d.cfg.checkpointDir(), name)); err != nil {
		d.log.Warn("checkpoint not removed", "container", name, "err", err)
	}
}

// dirSize is the size of the regular files under dir.
func dirSize(dir string) (quantity.Bytes, error) {
	var n int64
	err := filepath.WalkDir(dir, func(_ string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if e.Type().IsRegular() {
			fi, err := e.Info()
			if err != nil {
				return err
			}
			n += fi.Size()
		}
		return nil
	})
	return quantity.Bytes(n), err
}

// checkpoints reports whether sb's machine may have a checkpoint.
func (d *Driver) checkpoints(sb sandbox.Sandbox) bool {
	return sb.Runtime != "" && gvisor(d.cfg.Runtimes[RuntimeName(sb.Runtime)])
}
