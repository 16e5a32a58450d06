// Package drivertest is the contract every sandbox.Driver keeps. The fake,
// podman and Kubernetes drivers all run it, so a fake cannot drift from the
// real thing.
package drivertest

import (
	"bufio"
	"context"
	"errors"
	"net"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"berth.dev/berth/internal/fault"
	"berth.dev/berth/internal/quantity"
	"berth.dev/berth/internal/reach"
	"berth.dev/berth/internal/sandbox"
)

// Options say what the driver under test needs.
type Options struct {
	// NewDriver returns a driver to test; it cleans up after itself.
	NewDriver func(t *testing.T) sandbox.Driver
	// Image is an image the driver can run for an engineer sandbox.
	Image string
	// SSHKey is an authorized key, for drivers that start sshd.
	SSHKey string
	// SSHD says the driver's machines really run the image's sshd on 2222
	// and the test can dial the address Addr gives (podman's do).
	SSHD bool
	// Timeout bounds each start; zero means a minute.
	Timeout time.Duration
}

// Spec returns a small engineer sandbox spec with a fresh id.
func Spec(o Options) sandbox.Spec {
	id := sandbox.NewID()
	sb := sandbox.Sandbox{
		ID: id, Name: "contract", Org: "org_contract", Project: "prj_contract", Owner: "usr_contract",
		Purpose: sandbox.PurposeEngineer, Class: "small", Image: o.Image, Isolation: sandbox.TierStandard,
		CPU: quantity.Millicores(500), Memory: quantity.Bytes(256 << 20), State: sandbox.StateStarting,
		SSHKeys: []string{o.SSHKey}, CreatedAt: time.Now(), ExpiresAt: time.Now().Add(time.Hour),
	}
	env := map[string]string{
		"BERTH_SANDBOX_ID": string(id), "BERTH_SANDBOX_NAME": sb.Name, "BERTH_SANDBOX_PURPOSE": "engineer",
		"BERTH_AUTHORIZED_KEYS": o.SSHKey, "BERTH_API_KEY": "berth_contractcontract0_SECRETVALUE",
	}
	return sandbox.Spec{Sandbox: sb, Env: env}
}

// Run checks the driver contract.
func Run(t *testing.T, o Options) {
	if o.Timeout == 0 {
		o.Timeout = time.Minute
	}
	start := func(t *testing.T, d sandbox.Driver, spec sandbox.Spec) {
		t.Helper()
		ctx, cancel := context.WithTimeout(t.Context(), o.Timeout)
		defer cancel()
		if err := d.Start(ctx, spec); err != nil {
			t.Fatalf("Start(%s) = %v", spec.Sandbox.ID, err)
		}
	}
	status := func(t *testing.T, d sandbox.Driver, id sandbox.ID) sandbox.MachineStatus {
		t.Helper()
		m, err := d.Inspect(t.Context(), id)
		if err != nil {
			t.Fatalf("Inspect(%s) = %v", id, err)
		}
		if m.ID != id {
			t.Fatalf("Inspect(%s).ID = %s", id, m.ID)
		}
		return m.Status
	}
	listed := func(t *testing.T, d sandbox.Driver, id sandbox.ID) bool {
		t.Helper()
		ms, err := d.List(t.Context())
		if err != nil {
			t.Fatalf("List = %v", err)
		}
		return slices.ContainsFunc(ms, func(m sandbox.Machine) bool { return m.ID == id })
	}

	t.Run("UnknownIsNotFound", func(t *testing.T) {
		d := o.NewDriver(t)
		id := sandbox.NewID()
		if _, err := d.Inspect(t.Context(), id); !errors.Is(err, fault.NotFound) {
			t.Errorf("Inspect(unknown) = %v, want fault.NotFound", err)
		}
		if err := d.Stop(t.Context(), id); !errors.Is(err, fault.NotFound) {
			t.Errorf("Stop(unknown) = %v, want fault.NotFound", err)
		}
		if err := d.Remove(t.Context(), id); err != nil {
			t.Errorf("Remove(unknown) = %v, want nil: removing twice must be safe", err)
		}
	})

	t.Run("Lifecycle", func(t *testing.T) {
		d := o.NewDriver(t)
		spec := Spec(o)
		id := spec.Sandbox.ID
		t.Cleanup(func() { _ = d.Remove(context.Background(), id) })
		start(t, d, spec)
		if got := status(t, d, id); got != sandbox.MachineRunning {
			t.Fatalf("after Start: status %s, want running", got)
		}
		if !listed(t, d, id) {
			t.Fatalf("List does not hold a started machine")
		}
		if err := d.Stop(t.Context(), id); err != nil {
			t.Fatalf("Stop = %v", err)
		}
		if got := status(t, d, id); got != sandbox.MachineStopped {
			t.Fatalf("after Stop: status %s, want stopped", got)
		}
		if !listed(t, d, id) {
			t.Fatalf("List forgot a stopped machine: its volume is still there")
		}
		start(t, d, sandbox.Spec{Sandbox: spec.Sandbox}) // resume: the machine keeps its environment
		if got := status(t, d, id); got != sandbox.MachineRunning {
			t.Fatalf("after resume: status %s, want running", got)
		}
		spec.Replace = true
		spec.Env["BERTH_API_KEY"] = "berth_contractcontract1_NEWSECRET"
		if err := d.Stop(t.Context(), id); err != nil {
			t.Fatalf("Stop = %v", err)
		}
		start(t, d, spec) // resume after expiry: replaced on the same volume
		if got := status(t, d, id); got != sandbox.MachineRunning {
			t.Fatalf("after replace: status %s, want running", got)
		}
		if err := d.Remove(t.Context(), id); err != nil {
			t.Fatalf("Remove = %v", err)
		}
		if _, err := d.Inspect(t.Context(), id); !errors.Is(err, fault.NotFound) {
			t.Fatalf("Inspect after Remove = %v, want fault.NotFound", err)
		}
		if listed(t, d, id) {
			t.Fatalf("List holds a removed machine")
		}
		if err := d.Remove(t.Context(), id); err != nil {
			t.Fatalf("second Remove = %v, want nil", err)
		}
	})

	t.Run("StartAgainWhileRunning", func(t *testing.T) {
		d := o.NewDriver(t)
		spec := Spec(o)
		t.Cleanup(func() { _ = d.Remove(context.Background(), spec.Sandbox.ID) })
		start(t, d, spec)
		start(t, d, sandbox.Spec{Sandbox: spec.Sandbox})
		if got := status(t, d, spec.Sandbox.ID); got != sandbox.MachineRunning {
			t.Fatalf("status %s, want running", got)
		}
	})

	// A start a stopped gateway interrupted is finished with a fresh key:
	// Replace with an environment makes the machine whether or not one
	// was left (sandbox.Service's finishStart).
	t.Run("ReplaceWithNoMachine", func(t *testing.T) {
		d := o.NewDriver(t)
		spec := Spec(o)
		spec.Replace = true
		t.Cleanup(func() { _ = d.Remove(context.Background(), spec.Sandbox.ID) })
		start(t, d, spec)
		if got := status(t, d, spec.Sandbox.ID); got != sandbox.MachineRunning {
			t.Fatalf("status %s, want running", got)
		}
	})

	t.Run("SecretsStayOutOfDetails", func(t *testing.T) {
		d := o.NewDriver(t)
		spec := Spec(o)
		t.Cleanup(func() { _ = d.Remove(context.Background(), spec.Sandbox.ID) })
		start(t, d, spec)
		ms, err := d.List(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range ms {
			if m.Detail != "" && strings.Contains(m.Detail, spec.Env["BERTH_API_KEY"]) {
				t.Fatalf("machine detail reveals the sandbox key: %q", m.Detail)
			}
		}
	})

	t.Run("StoppedSaysWhen", func(t *testing.T) {
		d := o.NewDriver(t)
		spec := Spec(o)
		id := spec.Sandbox.ID
		t.Cleanup(func() { _ = d.Remove(context.Background(), id) })
		began := time.Now()
		start(t, d, spec)
		if m, err := d.Inspect(t.Context(), id); err != nil || !m.FinishedAt.IsZero() {
			t.Fatalf("Inspect(running) = %+v, %v: a running machine has no exit time", m, err)
		}
		if err := d.Stop(t.Context(), id); err != nil {
			t.Fatal(err)
		}
		// Said when known (a runtime may tell it only later), and then
		// when it was: after the start, not after now. Kubernetes says it
		// to the second.
		check := func(what string, m sandbox.Machine) {
			t.Helper()
			if at := m.FinishedAt; !at.IsZero() && (at.Before(began.Add(-time.Second)) || at.After(time.Now().Add(time.Second))) {
				t.Errorf("%s of a machine started at %v and stopped since: finished at %v", what, began, at)
			}
		}
		m, err := d.Inspect(t.Context(), id)
		if err != nil {
			t.Fatal(err)
		}
		check("Inspect", m)
		ms, err := d.List(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range ms {
			if m.ID == id {
				check("List", m)
			}
		}
	})

	t.Run("Watch", func(t *testing.T) {
		d := o.NewDriver(t)
		w, ok := d.(sandbox.Watcher)
		if !ok {
			t.Skip("the driver tells of no change as it happens (no sandbox.Watcher)")
		}
		changed, done := Watch(t, w)
		spec := Spec(o)
		id := spec.Sandbox.ID
		t.Cleanup(func() { _ = d.Remove(context.Background(), id) })
		// told waits within for the machine to be told of, after what the
		// test did; false when it was not.
		told := func(within time.Duration) bool {
			t.Helper()
			deadline := time.After(within)
			for {
				select {
				case got := <-changed:
					if got == id {
						return true
					}
				case err := <-done:
					t.Fatalf("Watch ended while the test watched: %v", err)
				case <-deadline:
					return false
				}
			}
		}
		drain := func() {
			for len(changed) > 0 {
				<-changed
			}
		}
		// A watch may take a moment to start, and says nothing of when it
		// has: the machine is started and stopped until its stop is told.
		first := sandbox.Spec{Sandbox: spec.Sandbox, Env: spec.Env}
		for deadline := time.Now().Add(o.Timeout); ; {
			start(t, d, first)
			first.Env = nil // the machine exists now: started again
			drain()
			if err := d.Stop(t.Context(), id); err != nil {
				t.Fatal(err)
			}
			if told(2 * time.Second) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("Watch told of no stop of the machine within %s", o.Timeout)
			}
		}
		// Now that it watches, a removal is told.
		drain()
		if err := d.Remove(t.Context(), id); err != nil {
			t.Fatal(err)
		}
		if !told(o.Timeout) {
			t.Fatalf("Watch did not tell of the machine's removal within %s", o.Timeout)
		}
	})

	t.Run("Reach", func(t *testing.T) {
		d := o.NewDriver(t)
		r, ok := d.(reach.Reacher)
		if !ok {
			t.Skip("the driver cannot reach sandboxes' ports (no reach.Reacher)")
		}
		ports := r.Ports()
		if ports.Lo < 1024 || ports.Hi > 65535 || ports.Lo > ports.Hi {
			t.Fatalf("Ports = %v: want unprivileged ports, low to high", ports)
		}
		if _, err := r.Addr(t.Context(), sandbox.NewID(), ports.Lo); !errors.Is(err, fault.NotFound) {
			t.Errorf("Addr(unknown) = %v, want fault.NotFound", err)
		}
		spec := Spec(o)
		id := spec.Sandbox.ID
		t.Cleanup(func() { _ = d.Remove(context.Background(), id) })
		start(t, d, spec)
		addr, err := r.Addr(t.Context(), id, ports.Lo)
		switch {
		case errors.Is(err, fault.Unavailable):
			// Nothing listens there, as on a machine that runs nothing.
		case err != nil:
			t.Fatalf("Addr(running) = %v", err)
		default:
			_, port, err := net.SplitHostPort(addr)
			if err != nil || port != strconv.Itoa(ports.Lo) {
				t.Fatalf("Addr(running, %d) = %q, want host:%d", ports.Lo, addr, ports.Lo)
			}
		}
		if o.SSHD && ports.Contains(2222) { // sshd: the driver started it and waited for it
			addr, err := r.Addr(t.Context(), id, 2222)
			if err != nil {
				t.Fatalf("Addr(running, 2222) = %v", err)
			}
			if line := Greeting(t, addr); !strings.HasPrefix(line, "SSH-") {
				t.Errorf("port 2222 of a ready engineer sandbox says %q, want sshd's greeting", line)
			}
		}
		if err := d.Stop(t.Context(), id); err != nil {
			t.Fatal(err)
		}
		if _, err := r.Addr(t.Context(), id, ports.Lo); !errors.Is(err, fault.Conflict) {
			t.Errorf("Addr(stopped) = %v, want fault.Conflict", err)
		}
	})
}

// Watch runs w.Watch until the test ends, and returns the ids it tells
// of and its error should it end before: it must end with nil once its
// context is done.
func Watch(t *testing.T, w sandbox.Watcher) (changed <-chan sandbox.ID, done <-chan error) {
	ids := make(chan sandbox.ID, 1024)
	ctx, cancel := context.WithCancel(context.Background())
	ended := make(chan error, 1) // the test's: it may take the error
	finished := make(chan struct{})
	var err error
	go func() {
		defer close(finished)
		err = w.Watch(ctx, func(id sandbox.ID) {
			select {
			case ids <- id:
			default:
			}
		})
		ended <- err
	}()
	t.Cleanup(func() {
		cancel()
		<-finished // not ended, which a test that saw Watch end has emptied
		if err != nil {
			t.Errorf("Watch ended with %v, want nil when its context is done and not before", err)
		}
	})
	return ids, ended
}

// Greeting reads the first line a server at addr says (sshd's greeting).
func Greeting(t *testing.T, addr string) string {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatalf("dial %s: %v", addr, err)
	}
	defer c.Close()
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	line, _ := bufio.NewReader(c).ReadString('\n')
	return line
}
