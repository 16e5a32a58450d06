package podman

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// runtimeContainer is one entry of `runc list --format json` (runsc's has
// no creation time: its annotations or its bundle tell it).
type runtimeContainer struct {
	ID          string            `json:"id"`
	Status      string            `json:"status"`
	Bundle      string            `json:"bundle"`
	Created     time.Time         `json:"created"`
	Annotations map[string]string `json:"annotations"`
}

// createdAnnotation is where podman writes a container's creation time
// into its OCI spec.
const createdAnnotation = "io.kubernetes.cri-o.Created"

// created is when c was made: the runtime's word, else podman's
// annotation, else its bundle's spec file; zero when nothing says.
func (c runtimeContainer) created() time.Time {
	if !c.Created.IsZero() {
		return c.Created
	}
	if t, err := time.Parse(time.RFC3339Nano, c.Annotations[createdAnnotation]); err == nil {
		return t
	}
	if fi, err := os.Stat(filepath.Join(c.Bundle, "config.json")); err == nil {
		return fi.ModTime()
	}
	return time.Time{}
}

// Tidy removes what the OCI runtimes still hold of containers podman no
// longer knows (notes/podman.md §9): a podman killed while it created a
// container leaves, even after `podman rm -f`, the runtime's state with a
// waiting init process. Each runtime podman uses is asked (runc, and the
// configured ones such as gVisor's runsc, which keeps state of its own);
// only containers whose bundle lies in this driver's store are looked at,
// and only those older than a couple of minutes; `delete --force` ends the
// process and removes the state. It returns the ids it removed.
//
// First it removes the env files a gateway killed during `podman run`
// left, each with a sandbox's key (envfile.go), and the handoff
// directories of machines that are gone (handoff.go), unpauses what a
// killed fork left paused, and lets go the standbys of machines suspended
// longer than Config.Standby (checkpoint.go); their paths and names are
// among what it returns. One part's failure leaves the others to run.
func (d *Driver) Tidy(ctx context.Context) ([]string, error) {
	removed, envErr := d.tidyEnvFiles(ctx)
	gone, handoffErr := d.tidyHandoff(ctx)
	removed = append(removed, gone...)
	unpaused, pauseErr := d.tidyPaused(ctx)
	removed = append(removed, unpaused...)
	letGo, standbyErr := d.tidyStandbys(ctx)
	removed = append(removed, letGo...)
	envErr = errors.Join(envErr, handoffErr, pauseErr, standbyErr)
	var known map[string]bool // podman's containers, listed once when needed
	for _, bin := range d.runtimeBinaries() {
		r, err := d.tidyRuntime(ctx, bin, &known)
		removed = append(removed, r...)
		if err != nil {
			return removed, errors.Join(envErr, err)
		}
	}
	return removed, envErr
}

// tidyPaused unpauses the machines of this deployment that a fork paused
// and a gateway killed mid-fork never unpaused (fork.go): paused, they
// count as running and nothing else would ever wake them. A fork under
// way in this process is left alone. It returns the names it unpaused.
func (d *Driver) tidyPaused(ctx context.Context) ([]string, error) {
	out, err := d.run(ctx, nil, "ps", "--filter", "label="+labelDeployment+"="+d.cfg.Deployment, "--filter", "status=paused", "--format", "{{.Names}}")
	if err != nil {
		return nil, err
	}
	var woken []string
	var errs []error
	for name := range strings.FieldsSeq(string(out)) {
		if d.forkingNow(name) {
			continue
		}
		if _, err := d.run(ctx, nil, "unpause", name); err != nil && !noSuch(err) {
			errs = append(errs, err)
			continue
		}
		d.log.WarnContext(ctx, "a machine a fork left paused runs again", "container", name)
		woken = append(woken, name)
	}
	return woken, errors.Join(errs...)
}

// runtimeBinaries are the OCI runtimes podman runs containers with:
// runc (podman's runtime = "runc", found on its search path as it is
// here) and the configured ones, each once.
func (d *Driver) runtimeBinaries() []string {
	var bins []string
	if runc, err := exec.LookPath("runc"); err == nil {
		bins = append(bins, runc)
	}
	for _, name := range slices.Sorted(maps.Keys(d.cfg.Runtimes)) {
		if bin := d.cfg.runtimePath(name); !slices.Contains(bins, bin) {
			bins = append(bins, bin)
		}
	}
	return bins
}

// tidyRuntime removes one runtime's orphans; known is filled on first use.
func (d *Driver) tidyRuntime(ctx context.Context, bin string, known *map[string]bool) ([]string, error) {
	// The runtime first, podman second: a container created in between
	// is then in podman's listing, never taken for an orphan; one removed
	// in between is gone from the runtime too, and skipped.
	out, err := d.runtime(ctx, bin, "list", "--format", "json")
	for try := 0; err != nil && try < 3 && strings.Contains(err.Error(), "no such file or directory"); try++ {
		// runc list fails whole when a container it is reading goes
		// meanwhile (another gateway's, a test's): ask again.
		time.Sleep(50 * time.Millisecond)
		out, err = d.runtime(ctx, bin, "list", "--format", "json")
	}
	if err != nil {
		return nil, err
	}
	var listed []runtimeContainer
	if err := json.Unmarshal(orEmpty(out), &listed); err != nil {
		return nil, fmt.Errorf("%s list: unexpected answer: %w", filepath.Base(bin), err)
	}
	ours := filepath.Join(d.cfg.StateDir, "storage", "overlay-containers") + string(filepath.Separator)
	var candidates []runtimeContainer
	for _, c := range listed {
		// Age is a second guard: podman records a container before the
		// runtime creates it, so a young one podman does not know yet is
		// not expected, but costs nothing to leave for the next sweep.
		if at := c.created(); strings.HasPrefix(c.Bundle, ours) && !at.IsZero() && time.Since(at) > d.cfg.OrphanAge {
			candidates = append(candidates, c)
		}
	}
	if len(candidates) == 0 {
		return nil, nil
	}
	if *known == nil {
		out, err = d.run(ctx, nil, "ps", "--all", "--external", "--no-trunc", "--format", "{{.ID}}")
		if err != nil {
			return nil, err
		}
		*known = map[string]bool{}
		for _, id := range strings.Fields(string(out)) {
			(*known)[id] = true
		}
	}
	var removed []string
	for _, c := range candidates {
		if (*known)[c.ID] {
			continue
		}
		if _, err := d.runtime(ctx, bin, "delete", "--force", c.ID); err != nil {
			if strings.Contains(err.Error(), "does not exist") || strings.Contains(err.Error(), "not found") {
				continue
			}
			return removed, err
		}
		d.log.InfoContext(ctx, "orphaned runtime container removed", "runtime", filepath.Base(bin), "container", c.ID, "status", c.Status, "created", c.created())
		removed = append(removed, c.ID)
	}
	return removed, nil
}

// runtime runs the OCI runtime's own command line.
func (d *Driver) runtime(ctx context.Context, bin string, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.SysProcAttr = ownGroup()
	out, err := cmd.Output()
	if err != nil {
		msg := ""
		if ee, ok := errors.AsType[*exec.ExitError](err); ok {
			msg = lastLines(strings.TrimSpace(string(ee.Stderr)), 3)
		}
		return out, fmt.Errorf("%s %s: %v: %s", filepath.Base(bin), args[0], err, msg)
	}
	return out, nil
}
