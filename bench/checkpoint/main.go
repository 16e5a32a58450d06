// Command checkpoint measures suspend with memory on the isolated tier
// (issue 25): the podman driver (internal/driver/podman), in this process
// as the gateway runs it, on real podman with gVisor's runsc, over the
// sandbox image `make images` built. One engineer sandbox of 2 GiB is
// started, then N times, alternating which goes first:
//
//   - resume from memory: Checkpoint (runsc saves memory and processes,
//     the machine stops and waits made: its standby), then Restore, which
//     returns at sshd's first greeting on the machine's address;
//   - cold start: Stop, then Start of the same sandbox from its volume,
//     which returns at the same greeting: what a resume was before.
//
// Each is timed to that first greeting; a second connection then checks
// sshd greets again, outside the time (under gVisor each connection
// costs sshd a fork and re-exec, about 100 ms, which is not the
// resume's). While the sandbox is suspended, the host memory its standby
// holds (the proportional set size of the processes that name the
// container: conmon, runsc's sandbox and gofer) is measured beside what
// the same processes hold while it runs.
//
// then a fork of it into 4 (Fork, then the 4 restores at once, as the
// gateway's start queue runs them, until every fork's sshd greets)
// against 4 cold creates of the same sandbox at once until every one
// greets; and the checkpoint and restore again with 1 GiB of its memory
// in use (a file of random bytes on its root filesystem, which gVisor
// keeps in memory), which a checkpoint must write and a restore read
// back. It
// prints each figure's median, and with BERTH_BENCH_REPORT set hands them
// to bench/all. Issue 25's goal: resume from memory → greeting at most
// 0.5 of a cold start's.
//
//	go run ./bench/checkpoint [-n 5]   (BERTH_TEST_RUNSC: runsc; BERTH_SANDBOX_PODMAN_ROOT: the podman root)
package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"berth.dev/berth/bench/internal/report"
	"berth.dev/berth/bench/internal/stats"
	"berth.dev/berth/internal/driver/drivertest"
	"berth.dev/berth/internal/driver/podman"
	"berth.dev/berth/internal/quantity"
	"berth.dev/berth/internal/sandbox"
)

const image = "localhost/berth-sandbox:latest"

func main() {
	n := flag.Int("n", 5, "runs of each kind")
	flag.Parse()
	if err := run(*n); err != nil {
		fmt.Fprintln(os.Stderr, "bench/checkpoint:", err)
		os.Exit(1)
	}
}

func run(n int) error {
	runsc := os.Getenv("BERTH_TEST_RUNSC")
	if runsc == "" {
		return errors.New("BERTH_TEST_RUNSC must name a runsc binary (scripts/build-runsc)")
	}
	root := os.Getenv("BERTH_SANDBOX_PODMAN_ROOT")
	if root == "" {
		wd, _ := os.Getwd()
		root = filepath.Join(wd, ".berth", "data", "podman")
	}
	ctx := context.Background()
	d, err := podman.New(podman.Config{StateDir: root, Deployment: fmt.Sprintf("bench-checkpoint-%d", os.Getpid()),
		Runtimes: map[string]string{"runsc": runsc}, Standby: 24 * time.Hour}, slog.New(slog.DiscardHandler))
	if err != nil {
		return err
	}
	defer d.Close()
	// The driver contract's small engineer sandbox, on the isolated tier
	// with 2 cores and 2 GiB.
	first := drivertest.Spec(drivertest.Options{Image: image,
		SSHKey: "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIGQ0n8q0dvGXmfhT3x7Jt0yq4xNn6JkJ3sJ8QmV4c2Xk bench"})
	sb := first.Sandbox
	id := sb.ID
	sb.Isolation, sb.Runtime, sb.CPU, sb.Memory = sandbox.TierIsolated, runsc, quantity.Millicores(2000), quantity.Bytes(2<<30)
	defer func() {
		if err := d.Remove(context.WithoutCancel(ctx), id); err != nil {
			fmt.Fprintln(os.Stderr, "bench/checkpoint: the sandbox was not removed:", err)
		}
	}()
	if err := d.Start(ctx, sandbox.Spec{Sandbox: sb, Env: first.Env}); err != nil {
		return err
	}
	spec := sandbox.Spec{Sandbox: sb}
	name := "berth-" + string(id)
	pm := func(args ...string) (string, error) {
		cmd := exec.Command("podman", args...)
		cmd.Env = append(os.Environ(), "CONTAINERS_CONF="+root+"/containers.conf", "CONTAINERS_STORAGE_CONF="+root+"/storage.conf")
		out, err := cmd.CombinedOutput()
		if err != nil {
			return "", fmt.Errorf("podman %s: %v: %s", args[0], err, out)
		}
		return string(out), nil
	}
	for _, touched := range []int{0, 1 << 30} {
		if touched > 0 {
			if err := forkFigure(ctx, d, sandbox.Spec{Sandbox: sb, Env: first.Env}, n); err != nil {
				return err
			}
		}
		label := "an idle engineer sandbox"
		if touched > 0 {
			label = "an engineer sandbox with 1 GiB touched"
			// 1 GiB of the sandbox's memory in use: a file of random
			// bytes on its root filesystem, whose writes gVisor keeps in
			// its memory. (Not a process of podman exec's: gVisor ends
			// those at a restore, having no way to give their output
			// back; a process under the machine's init, such as one
			// started over ssh, goes on.)
			if _, err := pm("exec", name, "sh", "-c", "head -c 1073741824 /dev/urandom > /var/tmp/touched"); err != nil {
				return err
			}
		}
		var ckpt, restore, stop, cold []time.Duration
		var sizes, standby, running []float64
		// memoryInto adds the host memory the idle sandbox's processes
		// hold to figures (the touched sandbox's is not a figure).
		memoryInto := func(figures *[]float64) error {
			if touched > 0 {
				return nil
			}
			pss, err := containerPSS(ctx, pm, name)
			*figures = append(*figures, pss)
			return err
		}
		var loads report.Loads
		for i := range n {
			loads.Sample()
			for k := range 2 {
				if (i+k)%2 == 0 {
					if err := memoryInto(&running); err != nil {
						return err
					}
					t0 := time.Now()
					size, err := d.Checkpoint(ctx, id)
					if err != nil {
						return err
					}
					t1 := time.Now()
					if err := memoryInto(&standby); err != nil {
						return err
					}
					t2 := time.Now()
					why, err := d.Restore(ctx, spec)
					if err != nil {
						return err
					}
					if why != "" {
						return fmt.Errorf("restore fell back to a cold start: %s", why)
					}
					t3 := time.Now()
					if err := greets(ctx, d, id); err != nil {
						return err
					}
					ckpt, restore, sizes = append(ckpt, t1.Sub(t0)), append(restore, t3.Sub(t2)), append(sizes, float64(size))
				} else if touched == 0 {
					// A cold start ends the process holding the memory:
					// only the idle sandbox has one to compare with.
					t0 := time.Now()
					if err := d.Stop(ctx, id); err != nil {
						return err
					}
					t1 := time.Now()
					if err := d.Start(ctx, spec); err != nil {
						return err
					}
					t2 := time.Now()
					if err := greets(ctx, d, id); err != nil {
						return err
					}
					stop, cold = append(stop, t1.Sub(t0)), append(cold, t2.Sub(t1))
				}
			}
			fmt.Fprintf(os.Stderr, "%s, run %d/%d: checkpoint %s (%.0f MiB), restore → greeting %s\n", label, i+1, n,
				ckpt[len(ckpt)-1].Round(time.Millisecond), sizes[len(sizes)-1]/(1<<20), restore[len(restore)-1].Round(time.Millisecond))
		}
		mc, mr, ms := stats.Median(ckpt), stats.Median(restore), stats.Median(sizes)
		fmt.Printf("%s, median of %d: checkpoint %s, %.0f MiB; restore → sshd greeting %s\n", label, n, mc.Round(time.Millisecond), ms/(1<<20), mr.Round(time.Millisecond))
		if touched == 0 {
			mcold, mstop := stats.Median(cold), stats.Median(stop)
			fmt.Printf("  cold start → sshd greeting %s (stop %s): ratio %.2f\n", mcold.Round(time.Millisecond), mstop.Round(time.Millisecond), float64(mr)/float64(mcold))
			fmt.Printf("  host memory while suspended (the standby) %.1f MiB, while running %.1f MiB\n", stats.Median(standby)/(1<<20), stats.Median(running)/(1<<20))
			for _, f := range []report.Figure{
				{Name: "resume from memory → sshd greeting (idle isolated sandbox)", Value: ms3(mr), Baseline: ms3(mcold) + " (cold start of it)",
					Ratio: float64(mr) / float64(mcold), Goal: "≤ 0.5"},
				{Name: "checkpoint of an idle isolated sandbox", Value: fmt.Sprintf("%s, %.1f MiB", ms3(mc), ms/(1<<20)), Baseline: ms3(mstop) + " (a stop of it)",
					Ratio: float64(mc) / float64(mstop)},
				{Name: "host memory a suspended isolated sandbox holds (its standby)", Value: fmt.Sprintf("%.1f MiB", stats.Median(standby)/(1<<20)),
					Baseline: fmt.Sprintf("%.1f MiB (the same processes while it runs)", stats.Median(running)/(1<<20)),
					Ratio:    stats.Median(standby) / stats.Median(running)},
			} {
				f.Bench, f.N, f.Load = "checkpoint", n, loads.String()
				if err := report.Emit(f); err != nil {
					return err
				}
			}
		} else {
			for _, f := range []report.Figure{
				{Name: "checkpoint of an isolated sandbox with 1 GiB touched", Value: fmt.Sprintf("%s, %.0f MiB", ms3(mc), ms/(1<<20)),
					Baseline: "1024 MiB touched", Ratio: ms / float64(1<<30)},
				{Name: "restore → sshd greeting with 1 GiB touched", Value: ms3(mr)},
			} {
				f.Bench, f.N, f.Load = "checkpoint", n, loads.String()
				if err := report.Emit(f); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// forks is how many sandboxes the fork figure makes at once.
const forks = 4

// forkFigure times a fork of src into 4 against 4 cold creates of the
// same sandbox, n times each, alternating which goes first.
func forkFigure(ctx context.Context, d *podman.Driver, src sandbox.Spec, n int) error {
	// specs are 4 new sandboxes like src, each its own id and environment.
	specs := func() []sandbox.Spec {
		out := make([]sandbox.Spec, forks)
		for i := range out {
			sb := src.Sandbox
			sb.ID = sandbox.NewID()
			env := maps.Clone(src.Env)
			env["BERTH_SANDBOX_ID"] = string(sb.ID)
			out[i] = sandbox.Spec{Sandbox: sb, Env: env}
		}
		return out
	}
	// all runs start on each spec at once and waits for every greeting.
	all := func(specs []sandbox.Spec, start func(sandbox.Spec) error) error {
		errs := make([]error, len(specs))
		var wg sync.WaitGroup
		for i, spec := range specs {
			wg.Go(func() {
				if errs[i] = start(spec); errs[i] == nil {
					errs[i] = greets(ctx, d, spec.Sandbox.ID)
				}
			})
		}
		wg.Wait()
		return errors.Join(errs...)
	}
	remove := func(specs []sandbox.Spec) {
		for _, s := range specs {
			if err := d.Remove(context.WithoutCancel(ctx), s.Sandbox.ID); err != nil {
				fmt.Fprintln(os.Stderr, "bench/checkpoint: a sandbox was not removed:", err)
			}
		}
	}
	var forked, saved, cold []time.Duration
	var loads report.Loads
	for i := range n {
		loads.Sample()
		for k := range 2 {
			made := specs()
			t0 := time.Now()
			if (i+k)%2 == 0 {
				if _, err := d.Fork(ctx, src.Sandbox.ID, made); err != nil {
					remove(made)
					return err
				}
				t1 := time.Now()
				err := all(made, func(s sandbox.Spec) error {
					why, err := d.Restore(ctx, sandbox.Spec{Sandbox: s.Sandbox})
					if err == nil && why != "" {
						err = fmt.Errorf("a fork started cold: %s", why)
					}
					return err
				})
				if err != nil {
					remove(made)
					return err
				}
				forked, saved = append(forked, time.Since(t0)), append(saved, t1.Sub(t0))
			} else {
				if err := all(made, func(s sandbox.Spec) error { return d.Start(ctx, s) }); err != nil {
					remove(made)
					return err
				}
				cold = append(cold, time.Since(t0))
			}
			remove(made)
		}
		fmt.Fprintf(os.Stderr, "fork into %d, run %d/%d: %s (save and make %s); %d cold creates %s\n", forks, i+1, n,
			ms3(forked[len(forked)-1]), ms3(saved[len(saved)-1]), forks, ms3(cold[len(cold)-1]))
	}
	mf, ms, mc := stats.Median(forked), stats.Median(saved), stats.Median(cold)
	fmt.Printf("fork into %d → every fork greets, median of %d: %s (save and make %s); %d cold creates → every one greets %s: ratio %.2f\n",
		forks, n, ms3(mf), ms3(ms), forks, ms3(mc), float64(mf)/float64(mc))
	f := report.Figure{Bench: "checkpoint", Name: fmt.Sprintf("fork into %d → every fork's sshd greets", forks),
		Value: fmt.Sprintf("%s (save and make %s)", ms3(mf), ms3(ms)), Baseline: fmt.Sprintf("%s (%d cold creates at once)", ms3(mc), forks),
		Ratio: float64(mf) / float64(mc), N: n, Load: loads.String()}
	return report.Emit(f)
}

func ms3(d time.Duration) string { return d.Round(time.Millisecond).String() }

// greets checks sshd answers with its greeting on the machine's address:
// Restore and Start return once it does, so this is a check, not a wait.
func greets(ctx context.Context, d *podman.Driver, id sandbox.ID) error {
	addr, err := d.Addr(ctx, id, 2222)
	if err != nil {
		return err
	}
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		return err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	line, err := bufio.NewReader(c).ReadString('\n')
	if !strings.HasPrefix(line, "SSH-2.0-") {
		return fmt.Errorf("sshd at %s said %q (%v)", addr, line, err)
	}
	return nil
}

// containerPSS is the proportional set size, in bytes, of the host's
// processes whose command line names the container called name's full
// id: its conmon, runsc's sandbox and gofer (and, while it runs, the
// sandbox's memory, which runsc's sandbox process holds).
func containerPSS(ctx context.Context, pm func(args ...string) (string, error), name string) (float64, error) {
	full, err := pm("container", "inspect", "--format", "{{.Id}}", name)
	if err != nil {
		return 0, err
	}
	full = strings.TrimSpace(full)
	if len(full) != 64 {
		return 0, fmt.Errorf("podman inspect %s: id %q", name, full)
	}
	procs, err := filepath.Glob("/proc/[0-9]*/cmdline")
	if err != nil {
		return 0, err
	}
	var total float64
	for _, p := range procs {
		if ctx.Err() != nil {
			return 0, ctx.Err()
		}
		cmd, err := os.ReadFile(p)
		if err != nil || !strings.Contains(string(cmd), full) {
			continue // gone, or not the container's
		}
		rollup, err := os.ReadFile(filepath.Join(filepath.Dir(p), "smaps_rollup"))
		if err != nil {
			continue
		}
		for line := range strings.Lines(string(rollup)) {
			if f := strings.Fields(line); len(f) == 3 && f[0] == "Pss:" {
				kb, err := strconv.ParseFloat(f[1], 64)
				if err == nil {
					total += kb * 1024
				}
			}
		}
	}
	if total == 0 {
		return 0, fmt.Errorf("no process of the host names the container %s", name)
	}
	return total, nil
}
