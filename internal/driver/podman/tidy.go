package podman

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// runtimeContainer is one entry of `runc list --format json`.
type runtimeContainer struct {
	ID      string    `json:"id"`
	Status  string    `json:"status"`
	Bundle  string    `json:"bundle"`
	Created time.Time `json:"created"`
}

// Tidy removes what the OCI runtime still holds of containers podman no
// longer knows (notes/podman.md §9): a podman killed while it created a
// container leaves, even after `podman rm -f`, runc's state with a
// `runc init` process waiting in its cgroup. Only containers whose bundle
// lies in this driver's store are looked at, and only those older than a
// couple of minutes; `runc delete --force` ends the process and removes the
// state and the cgroup. It returns the ids it removed.
//
// gVisor's runsc keeps its own state and is not looked at.
func (d *Driver) Tidy(ctx context.Context) ([]string, error) {
	// podman's runtime = "runc" (ContainersConf) is found on its search
	// path, as it is here.
	runc, err := exec.LookPath("runc")
	if err != nil {
		return nil, nil // no runc here: nothing of it to tidy
	}
	// The runtime first, podman second: a container created in between
	// is then in podman's listing, never taken for an orphan; one removed
	// in between is gone from the runtime too, and skipped.
	out, err := d.runtime(ctx, runc, "list", "--format", "json")
	if err != nil {
		return nil, err
	}
	var listed []runtimeContainer
	if err := json.Unmarshal(orEmpty(out), &listed); err != nil {
		return nil, fmt.Errorf("runc list: unexpected answer: %w", err)
	}
	ours := filepath.Join(d.cfg.StateDir, "storage", "overlay-containers") + string(filepath.Separator)
	var candidates []runtimeContainer
	for _, c := range listed {
		// Age is a second guard: podman records a container before the
		// runtime creates it, so a young one podman does not know yet is
		// not expected, but costs nothing to leave for the next sweep.
		if strings.HasPrefix(c.Bundle, ours) && time.Since(c.Created) > d.cfg.OrphanAge {
			candidates = append(candidates, c)
		}
	}
	if len(candidates) == 0 {
		return nil, nil
	}
	out, err = d.run(ctx, nil, "ps", "--all", "--external", "--no-trunc", "--format", "{{.ID}}")
	if err != nil {
		return nil, err
	}
	known := map[string]bool{}
	for _, id := range strings.Fields(string(out)) {
		known[id] = true
	}
	var removed []string
	for _, c := range candidates {
		if known[c.ID] {
			continue
		}
		if _, err := d.runtime(ctx, runc, "delete", "--force", c.ID); err != nil {
			if strings.Contains(err.Error(), "does not exist") {
				continue
			}
			return removed, err
		}
		d.log.InfoContext(ctx, "orphaned runtime container removed", "container", c.ID, "status", c.Status, "created", c.Created)
		removed = append(removed, c.ID)
	}
	return removed, nil
}

// runtime runs the OCI runtime's own command line.
func (d *Driver) runtime(ctx context.Context, bin string, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, bin, args...)
	out, err := cmd.Output()
	if err != nil {
		msg := ""
		if ee, ok := errors.AsType[*exec.ExitError](err); ok {
			msg = lastLines(strings.TrimSpace(string(ee.Stderr)), 3)
		}
		return out, fmt.Errorf("runc %s: %v: %s", args[0], err, msg)
	}
	return out, nil
}
