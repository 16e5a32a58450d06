package podman

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os/exec"
	"time"

	"berth.dev/berth/internal/runner"
	"berth.dev/berth/internal/sandbox"
)

var _ sandbox.Watcher = (*Driver)(nil)

// event is the part of a `podman events --format json` line the driver
// reads: what happened, and the container's labels.
type event struct {
	Name       string
	Status     string
	Attributes map[string]string
}

// Watch tells changed of each of the deployment's containers that dies or
// is removed, from `podman events` on the driver's own store: the file
// logger in its tmp_dir (containers.conf), filtered by the deployment's
// label, from the moment Watch is called (--since: nothing is missed while
// podman starts). It returns nil when ctx is done.
//
// podman events may end on its own: its file logger cuts the file at 1
// MiB, and a busy store fills that in minutes. Watch then starts it again
// at once, from a little before the last one ended (what it tells twice
// is looked at twice, which changes nothing), so that ending does not
// leave the sweep as the only way to hear of a machine. Only one that
// ends within restartAfter of its start ends Watch, with its error:
// podman that cannot follow its events at all.
func (d *Driver) Watch(ctx context.Context, changed func(sandbox.ID)) error {
	since := time.Now()
	for {
		began := time.Now()
		err := d.watchEvents(ctx, since, changed)
		if ctx.Err() != nil {
			return nil
		}
		if time.Since(began) < restartAfter {
			return err
		}
		d.log.WarnContext(ctx, "podman events ended; following them again", "err", err)
		since = time.Now().Add(-eventsOverlap)
	}
}

// restartAfter is how long podman events must have run for Watch to
// start it again; eventsOverlap how far back the next one starts.
const (
	restartAfter  = time.Second
	eventsOverlap = 2 * time.Second
)

// watchEvents runs podman events once, from since, until it ends.
func (d *Driver) watchEvents(ctx context.Context, since time.Time, changed func(sandbox.ID)) error {
	cmd := exec.CommandContext(ctx, d.cfg.Binary, "events", "--since", since.UTC().Format(time.RFC3339Nano), "--format", "json",
		"--filter", "type=container", "--filter", "label="+labelDeployment+"="+d.cfg.Deployment)
	cmd.Env = d.cfg.Env()
	cmd.SysProcAttr = ownGroup() // ended by ctx, not by the gateway's signal
	cmd.WaitDelay = 5 * time.Second
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("podman events: %w", err)
	}
	readErr := runner.ReadLines(out, false, func(b []byte) {
		var e event
		if json.Unmarshal(b, &e) != nil {
			return
		}
		if e.Status != "died" && e.Status != "remove" {
			return
		}
		id := sandbox.ID(e.Attributes[labelSandbox])
		if id == "" && e.Attributes[labelPool] != "" {
			claimed, ok := d.claimedBy(cmp.Or(e.Name, e.Attributes["name"]))
			if !ok {
				d.keep() // an unclaimed member went: make another
				return
			}
			id = claimed
		}
		if id == "" {
			return
		}
		d.forgetAddrs() // its address may be another's soon
		changed(id)
	})
	err = cmd.Wait()
	if ctx.Err() != nil {
		return nil
	}
	return &podmanError{args: []string{"events"}, err: cmp.Or(err, readErr, errors.New("it ended")), stderr: stderr.String()}
}
