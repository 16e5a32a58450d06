package podman

import (
	"context"
	"fmt"
	"io"
	"os/exec"
	"sync"

	"berth.dev/berth/internal/runner"
	"berth.dev/berth/internal/sandbox"
)

// Follow streams an agent run's output, stdout and stderr apart, until
// the container exits. podman logs --follow learns of an exit only from
// podman's events, so it follows an exited container for ever when it
// cannot read them (an events file another podman configuration does not
// write). podman wait polls instead: once it returns, the follow is
// stopped and a plain podman logs delivers what the follow had not,
// counted per stream in complete lines.
func (d *Driver) Follow(ctx context.Context, id sandbox.ID, line func(stdout bool, b []byte)) error {
	name := d.cfg.name(id)
	var mu sync.Mutex // line is called from one goroutine at a time
	var seen [2]int   // complete lines delivered, stdout and stderr
	deliver := func(s int) func(b []byte) {
		return func(b []byte) {
			mu.Lock()
			defer mu.Unlock()
			seen[s]++
			line(s == 0, b)
		}
	}
	fctx, stop := context.WithCancel(ctx)
	defer stop()
	follow, err := d.logs(fctx, name, true, [2]func([]byte){deliver(0), deliver(1)})
	if err != nil {
		return err
	}
	_, waitErr := d.run(ctx, nil, "wait", name)
	stop()
	_ = follow() // killed: its error says nothing
	if ctx.Err() != nil {
		return nil
	}
	if waitErr != nil {
		return waitErr
	}
	var skip [2]int
	rest := func(s int) func(b []byte) {
		return func(b []byte) {
			if skip[s] < seen[s] {
				skip[s]++
				return
			}
			line(s == 0, b)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	all, err := d.logs(ctx, name, false, [2]func([]byte){rest(0), rest(1)})
	if err != nil {
		return err
	}
	return all()
}

// logs starts podman logs (with follow, --follow) and calls each stream's
// func for each of its lines. A last line without a newline is delivered
// only without follow: a follow that is stopped may have read part of a
// line. The returned func waits for podman and the readers.
func (d *Driver) logs(ctx context.Context, name string, follow bool, to [2]func([]byte)) (func() error, error) {
	// Errors only: without events, podman logs --follow complains that it
	// cannot wait for the exit, on the stderr that carries the container's.
	args := []string{"--log-level=fatal", "logs"}
	if follow {
		args = append(args, "--follow")
	}
	cmd := exec.CommandContext(ctx, d.cfg.Binary, append(args, name)...)
	cmd.SysProcAttr = ownGroup()
	cmd.Env = d.cfg.Env()
	pipes := [2]io.ReadCloser{}
	var err error
	if pipes[0], err = cmd.StdoutPipe(); err != nil {
		return nil, err
	}
	if pipes[1], err = cmd.StderrPipe(); err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("podman logs: %w", err)
	}
	var wg sync.WaitGroup
	for s := range 2 {
		// podman's own complaints come out on stderr with the container's
		// lines, which are not for the gateway's logs: the error is bare.
		wg.Go(func() { _ = runner.ReadLines(pipes[s], !follow, to[s]) })
	}
	return func() error {
		wg.Wait()
		if err := cmd.Wait(); err != nil && ctx.Err() == nil {
			return fmt.Errorf("podman logs: %w", err)
		}
		return nil
	}, nil
}
