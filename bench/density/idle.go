package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"berth.dev/berth/bench/internal/report"
	"berth.dev/berth/bench/internal/stats"
	"berth.dev/berth/internal/api"
	"berth.dev/berth/internal/client"
)

// idle is the podman part: the gateway's RSS with no sandbox and with
// o.sandboxes idle ones, and each idle sandbox's memory.
func idle(ctx context.Context, o options) (err error) {
	if o.gatewayPID == 0 || o.podmanRoot == "" {
		return errors.New("podman: -gateway-pid and -podman-root are required")
	}
	c := client.New(os.Getenv("BERTH_URL"), os.Getenv("BERTH_API_KEY"), nil)
	if err := allow(ctx, c, o.sandboxes); err != nil {
		return err
	}
	// One answered request first, so the empty gateway is one that has
	// served the API, as the full one has.
	if have, err := c.Sandboxes(ctx, client.ListOptions{}); err != nil {
		return err
	} else if len(have) > 0 {
		return fmt.Errorf("the gateway holds %d sandboxes already; it must start empty", len(have))
	}
	var emptyLoads, fullLoads report.Loads
	empty, err := rssSamples(o.gatewayPID, o.n, &emptyLoads)
	if err != nil {
		return err
	}

	made, createErr := createAll(ctx, c, o)
	defer func() {
		// Terminated whatever happened: the script removes what is left.
		err = errors.Join(err, terminateAll(context.WithoutCancel(ctx), c, made, o.clients))
	}()
	if createErr != nil {
		return createErr
	}
	fmt.Fprintf(os.Stderr, "%d sandboxes running; idle for %v (load %.2f)\n", len(made), o.settle, report.Load())
	time.Sleep(o.settle)
	if err := stillRunning(ctx, c, made); err != nil {
		return err
	}
	fullLoads.Sample()
	mem, err := sandboxMemory(o.podmanRoot, made)
	if err != nil {
		return err
	}
	fullLoads.Sample()
	full, err := rssSamples(o.gatewayPID, o.n, &fullLoads)
	if err != nil {
		return err
	}

	loads := append(append(report.Loads{}, emptyLoads...), fullLoads...)
	e, f := stats.Median(empty), stats.Median(full)
	figures := []report.Figure{
		{Name: fmt.Sprintf("gateway RSS, %d idle sandboxes", len(made)), Value: mib(f), Baseline: mib(e) + " (none)",
			Ratio: f / e, Goal: "≤ 200 MiB", N: o.n, Load: loads.String()},
		{Name: "memory per idle sandbox, beyond the kernel's", Value: mib(stats.Median(mem.user)),
			Goal: "≤ 10 MiB", N: len(made), Load: fullLoads.String()},
		{Name: "  of it, its conmon's RSS", Value: mib(stats.Median(mem.conmon)), N: len(made), Load: fullLoads.String()},
		{Name: "kernel memory per idle sandbox (its cgroup)", Value: mib(stats.Median(mem.kernel)), N: len(made), Load: fullLoads.String()},
	}
	fmt.Printf("idle engineer sandboxes (class %s, podman, runc), medians; the sandbox's memory is its cgroup's less the kernel's (rss + cache) plus its conmon's VmRSS\n", o.class)
	for _, fig := range figures {
		if err := emit(fig); err != nil {
			return err
		}
	}
	fmt.Printf("  per sandbox: cgroup rss+cache median %s, mean %s; conmon PSS median %s; over all %d: %s beyond the kernel's, %s the kernel's\n",
		mib(stats.Median(mem.cgroup)), mib(mean(mem.cgroup)), mib(stats.Median(mem.conmonPSS)), len(made),
		mib(sum(mem.user)), mib(sum(mem.kernel)))
	return nil
}

// allow raises the caller's organisation's sandbox quota to n when it
// is lower, as an operator may.
func allow(ctx context.Context, c *client.Client, n int) error {
	g, err := c.Guardrail(ctx, "", "")
	if e, ok := errors.AsType[*api.Error](err); ok && e.Status == http.StatusNotFound {
		return nil // none set: no limit
	}
	if err != nil {
		return err
	}
	if g.MaxSandboxes == nil || *g.MaxSandboxes >= n {
		return nil
	}
	fmt.Fprintf(os.Stderr, "the organisation's max-sandboxes is %d: set to %d\n", *g.MaxSandboxes, n)
	g.MaxSandboxes = &n
	_, err = c.SetGuardrail(ctx, "", "", g)
	return err
}

// createAll makes o.sandboxes engineer sandboxes, o.clients at a time,
// and waits until every one runs. It returns those made, running or not,
// so they can be terminated.
func createAll(ctx context.Context, c *client.Client, o options) ([]api.Sandbox, error) {
	var (
		mu   sync.Mutex
		made []api.Sandbox
		errs []error
		next atomic.Int64
		wg   sync.WaitGroup
	)
	ids, err := openIDs(o.idsFile)
	if err != nil {
		return nil, err
	}
	defer ids.Close()
	began := time.Now()
	for range o.clients {
		wg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= o.sandboxes {
					return
				}
				sb, err := c.CreateSandbox(ctx, api.CreateSandbox{Name: fmt.Sprintf("density-%d", i), Class: o.class, SSHKeys: []string{o.sshKey}})
				mu.Lock()
				if err == nil {
					made = append(made, sb)
					_, err = fmt.Fprintln(ids, sb.ID)
				}
				if err != nil {
					errs = append(errs, err)
				}
				mu.Unlock()
				if err != nil {
					return
				}
				if err := running(ctx, c, sb.ID); err != nil {
					mu.Lock()
					errs = append(errs, err)
					mu.Unlock()
					return
				}
			}
		})
	}
	wg.Wait()
	fmt.Fprintf(os.Stderr, "created %d sandboxes in %v, %d at a time\n", len(made), time.Since(began).Round(time.Millisecond), o.clients)
	return made, errors.Join(errs...)
}

// openIDs opens the file of made sandboxes' ids, or /dev/null.
func openIDs(path string) (*os.File, error) {
	if path == "" {
		path = os.DevNull
	}
	return os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
}

// running waits until the sandbox runs.
func running(ctx context.Context, c *client.Client, id string) error {
	for deadline := time.Now().Add(3 * time.Minute); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		sb, err := c.Sandbox(ctx, id)
		if err != nil {
			return err
		}
		switch sb.State {
		case "running":
			return nil
		case "starting":
		default:
			return fmt.Errorf("sandbox %s is %s: %s", sb.Name, sb.State, sb.Reason)
		}
	}
	return fmt.Errorf("sandbox %s did not run in 3 minutes", id)
}

// stillRunning checks that every sandbox of sbs still runs.
func stillRunning(ctx context.Context, c *client.Client, sbs []api.Sandbox) error {
	var errs []error
	for _, sb := range sbs {
		got, err := c.Sandbox(ctx, sb.ID)
		if err == nil && got.State != "running" {
			err = fmt.Errorf("sandbox %s is %s after idling: %s", got.Name, got.State, got.Reason)
		}
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// terminateAll terminates sbs, clients at a time.
func terminateAll(ctx context.Context, c *client.Client, sbs []api.Sandbox, clients int) error {
	var (
		mu   sync.Mutex
		errs []error
		next atomic.Int64
		wg   sync.WaitGroup
	)
	for range clients {
		wg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= len(sbs) {
					return
				}
				if _, err := c.Terminate(ctx, sbs[i].ID); err != nil {
					mu.Lock()
					errs = append(errs, err)
					mu.Unlock()
				}
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// rssSamples is the process's VmRSS n times, a second apart, in bytes.
func rssSamples(pid, n int, loads *report.Loads) ([]float64, error) {
	var out []float64
	for i := range n {
		if i > 0 {
			time.Sleep(time.Second)
		}
		v, err := statusField(pid, "VmRSS")
		if err != nil {
			return nil, err
		}
		out = append(out, v)
		loads.Sample()
	}
	return out, nil
}

// statusField is a "kB" field of /proc/PID/status, in bytes.
func statusField(pid int, name string) (float64, error) {
	return kbField(fmt.Sprintf("/proc/%d/status", pid), name)
}

// kbField reads "NAME: N kB" from a /proc file, in bytes.
func kbField(path, name string) (float64, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	for line := range strings.Lines(string(b)) {
		k, v, ok := strings.Cut(line, ":")
		if !ok || k != name {
			continue
		}
		kb, err := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 64)
		if err != nil {
			return 0, fmt.Errorf("%s: %s: %w", path, name, err)
		}
		return kb * 1024, nil
	}
	return 0, fmt.Errorf("%s: no %s", path, name)
}

// memory is what each sandbox holds, in bytes, one entry per sandbox.
type memory struct {
	cgroup    []float64 // the cgroup's usage less the kernel's
	kernel    []float64 // the kernel's memory charged to the cgroup
	conmon    []float64 // its conmon's VmRSS
	conmonPSS []float64 // its conmon's PSS
	user      []float64 // cgroup + conmon: the figure
}

// sandboxMemory reads every sandbox's memory: its container's cgroup,
// found from its first process, and its conmon.
func sandboxMemory(root string, sbs []api.Sandbox) (memory, error) {
	args := []string{"inspect", "--format", "{{.State.Pid}} {{.State.ConmonPid}}"}
	for _, sb := range sbs {
		args = append(args, "berth-"+sb.ID)
	}
	cmd := exec.Command("podman", args...)
	cmd.Env = append(os.Environ(), "CONTAINERS_CONF="+filepath.Join(root, "containers.conf"),
		"CONTAINERS_STORAGE_CONF="+filepath.Join(root, "storage.conf"))
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return memory{}, fmt.Errorf("podman inspect: %w: %s", err, stderr.Bytes())
	}
	var m memory
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		var pid, conmon int
		if _, err := fmt.Sscan(sc.Text(), &pid, &conmon); err != nil {
			return memory{}, fmt.Errorf("podman inspect: %q: %w", sc.Text(), err)
		}
		user, kernel, err := cgroupMemory(pid)
		if err != nil {
			return memory{}, err
		}
		rss, err := statusField(conmon, "VmRSS")
		if err != nil {
			return memory{}, fmt.Errorf("conmon: %w", err)
		}
		pss, err := kbField(fmt.Sprintf("/proc/%d/smaps_rollup", conmon), "Pss")
		if err != nil {
			return memory{}, fmt.Errorf("conmon: %w", err)
		}
		m.cgroup, m.kernel = append(m.cgroup, user), append(m.kernel, kernel)
		m.conmon, m.conmonPSS = append(m.conmon, rss), append(m.conmonPSS, pss)
		m.user = append(m.user, user+rss)
	}
	if len(m.user) != len(sbs) {
		return memory{}, fmt.Errorf("podman inspect told of %d containers, not %d", len(m.user), len(sbs))
	}
	return m, nil
}

// cgroupMemory is the memory charged to the memory cgroup of process
// pid: the process's (user) and the kernel's own, in bytes. On cgroup v1
// (this machine's hybrid: runc with the cgroupfs manager puts a container
// in /sys/fs/cgroup/memory/libpod_parent/libpod-ID) usage counts the
// kernel's memory too, so user = usage − kmem; on v2, memory.current less
// memory.stat's kernel.
func cgroupMemory(pid int) (user, kernel float64, err error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pid))
	if err != nil {
		return 0, 0, err
	}
	dir, v1, err := memoryCgroup(string(b))
	if err != nil {
		return 0, 0, fmt.Errorf("process %d: %w", pid, err)
	}
	if v1 {
		usage, err := readNumber(filepath.Join(dir, "memory.usage_in_bytes"))
		if err != nil {
			return 0, 0, err
		}
		kmem, err := readNumber(filepath.Join(dir, "memory.kmem.usage_in_bytes"))
		if err != nil {
			return 0, 0, err
		}
		return usage - kmem, kmem, nil
	}
	current, err := readNumber(filepath.Join(dir, "memory.current"))
	if err != nil {
		return 0, 0, err
	}
	kmem, err := statField(filepath.Join(dir, "memory.stat"), "kernel")
	if err != nil {
		return 0, 0, err
	}
	return current - kmem, kmem, nil
}

// memoryCgroup is the directory of the memory cgroup a /proc/PID/cgroup
// names, and whether it is cgroup v1's: the v1 memory controller's line
// when there is one (a hybrid machine has both), else the v2 line's.
func memoryCgroup(procCgroup string) (dir string, v1 bool, err error) {
	var unified string
	for line := range strings.Lines(procCgroup) {
		parts := strings.SplitN(strings.TrimSpace(line), ":", 3)
		if len(parts) != 3 {
			continue
		}
		if parts[0] == "0" && parts[1] == "" {
			unified = parts[2]
		}
		for c := range strings.SplitSeq(parts[1], ",") {
			if c == "memory" {
				return filepath.Join("/sys/fs/cgroup/memory", parts[2]), true, nil
			}
		}
	}
	if unified != "" {
		return filepath.Join("/sys/fs/cgroup", unified), false, nil
	}
	return "", false, errors.New("no memory cgroup")
}

func readNumber(path string) (float64, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	return strconv.ParseFloat(strings.TrimSpace(string(b)), 64)
}

// statField is "NAME N" of a cgroup's memory.stat.
func statField(path, name string) (float64, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	for line := range strings.Lines(string(b)) {
		if k, v, ok := strings.Cut(strings.TrimSpace(line), " "); ok && k == name {
			return strconv.ParseFloat(v, 64)
		}
	}
	return 0, fmt.Errorf("%s: no %s", path, name)
}

func sum(vs []float64) float64 {
	var t float64
	for _, v := range vs {
		t += v
	}
	return t
}

func mean(vs []float64) float64 { return sum(vs) / float64(max(len(vs), 1)) }
