package e2e_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"berth.dev/berth/internal/api"
	"berth.dev/berth/internal/client"
	"berth.dev/berth/internal/sandbox"
	"berth.dev/berth/internal/store"
	"berth.dev/berth/internal/store/storetest"
)

// Accepted means it will start (issue 15): a create that answered 201
// ends running, whether the gateway is stopped in between with SIGTERM,
// killed with SIGKILL, or is a replica that dies while another leads.

// createMany sends n creates at once as the operator and returns the ids
// of those answered 201; each must be.
func (g *gateway) createMany(t *testing.T, c *client.Client, n int, prefix, pub string) []string {
	t.Helper()
	ids := make([]string, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			sb, err := c.CreateSandbox(context.Background(), api.CreateSandbox{Name: fmt.Sprintf("%s-%d", prefix, i), Class: "standard", SSHKeys: []string{pub}})
			ids[i], errs[i] = sb.ID, err
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatalf("creates %s-*: %v", prefix, err)
	}
	return ids
}

// exited waits for the gateway's process to end after a signal and says
// how long it took; within bounds the wait.
func (g *gateway) exited(t *testing.T, since time.Time, within time.Duration) time.Duration {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- g.cmd.Wait() }()
	select {
	case err := <-done:
		took := time.Since(since)
		g.cmd = nil
		if err != nil {
			t.Logf("the gateway exited: %v", err)
		}
		return took
	case <-time.After(within):
		_ = g.cmd.Process.Kill()
		<-done
		g.cmd = nil
		t.Fatalf("the gateway did not exit within %s of the signal:\n%s", within, g.log)
	}
	return 0
}

// rows reads the sandboxes' rows from the gateway's SQLite database while
// no gateway runs: what the last one left, before any start-up sweep.
func (g *gateway) rows(t *testing.T, ids []string) []sandbox.Sandbox {
	t.Helper()
	st, err := store.Open(context.Background(), filepath.Join(g.dataDir, "berth.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	var out []sandbox.Sandbox
	for _, id := range ids {
		sb, err := st.GetSandbox(context.Background(), sandbox.ID(id))
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, sb)
	}
	return out
}

// tally counts sandboxes by state, in words ("8 running, 2 starting").
func tally(states []string) string {
	n := map[string]int{}
	for _, s := range states {
		n[s]++
	}
	var parts []string
	for _, s := range []string{"running", "starting", "failed", "suspended", "expired", "terminated"} {
		if n[s] > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", n[s], s))
		}
	}
	return strings.Join(parts, ", ")
}

// settle polls the API until none of ids is starting and returns each
// one's state.
func (g *gateway) settle(t *testing.T, c *client.Client, ids []string, within time.Duration) []api.Sandbox {
	t.Helper()
	out := make([]api.Sandbox, len(ids))
	for i, id := range ids {
		out[i] = g.waitSandbox(c, id, within, func(sb api.Sandbox, late bool) bool {
			if late {
				t.Fatalf("sandbox %s is still %s after %s", id, sb.State, within)
			}
			return sb.State != "starting"
		})
	}
	return out
}

// envFiles lists the env files of ids left in the podman root (each holds
// a sandbox's key).
func (g *gateway) envFiles(t *testing.T, ids []string) []string {
	t.Helper()
	entries, err := os.ReadDir(filepath.Join(g.root, "env"))
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
	var left []string
	for _, e := range entries {
		for _, id := range ids {
			if strings.HasPrefix(e.Name(), id+".") {
				left = append(left, e.Name())
			}
		}
	}
	return left
}

// strayRuntimeState lists the OCI runtime's containers (runc's state)
// that belong to one of ids, by the BERTH_SANDBOX_ID in their bundle,
// and that podman does not know: what a podman killed mid-create leaves.
func (g *gateway) strayRuntimeState(t *testing.T, ids []string) []string {
	t.Helper()
	out, err := exec.Command("runc", "list", "--format", "json").Output()
	if err != nil {
		t.Fatalf("runc list: %v", err)
	}
	var rcs []struct{ ID, Bundle string }
	if err := json.Unmarshal(orEmpty(out), &rcs); err != nil {
		t.Fatalf("runc list: %v", err)
	}
	known := map[string]bool{}
	for _, id := range lines(g.podman("ps", "--all", "--external", "--no-trunc", "--format", "{{.ID}}")) {
		known[id] = true
	}
	var stray []string
	for _, rc := range rcs {
		if !strings.HasPrefix(rc.Bundle, g.root+"/") || known[rc.ID] {
			continue
		}
		b, err := os.ReadFile(filepath.Join(rc.Bundle, "config.json"))
		if err != nil {
			continue // gone meanwhile
		}
		var spec struct {
			Process struct{ Env []string }
		}
		if json.Unmarshal(b, &spec) != nil {
			continue
		}
		for _, id := range ids {
			if slices.Contains(spec.Process.Env, "BERTH_SANDBOX_ID="+id) {
				stray = append(stray, rc.ID+" ("+id+")")
			}
		}
	}
	return stray
}

func orEmpty(b []byte) []byte {
	if len(strings.TrimSpace(string(b))) == 0 || strings.TrimSpace(string(b)) == "null" {
		return []byte("[]")
	}
	return b
}

// checkFinished checks what an accepted sandbox should be after a fault:
// running, in exactly one running container with its volume, its key
// (read inside it over ssh) live at the gateway, and the audit log
// holding its create and every key it was given.
func (g *gateway) checkFinished(t *testing.T, key string, sb api.Sandbox) {
	t.Helper()
	if sb.State != "running" {
		t.Errorf("%s (%s) is %s: %s", sb.Name, sb.ID, sb.State, sb.Reason)
		return
	}
	c, v := g.objects(sb.ID)
	if c != "berth-"+sb.ID+" running" || v != "berth-"+sb.ID {
		t.Errorf("%s is running with containers %q and volumes %q, want one of each", sb.Name, c, v)
	}
	inside := ssh(t, key, g.ip(sb.ID), "echo $BERTH_API_KEY")
	who, err := client.New(g.url, inside, nil).Whoami(context.Background())
	if err != nil || who.Sandbox != sb.ID {
		t.Errorf("%s: the key inside its machine does not authenticate as the sandbox (%v, %+v)", sb.Name, err, who.Sandbox)
	}
	events, err := g.operator.Audit(context.Background(), client.AuditOptions{Sandbox: sb.ID})
	if err != nil {
		t.Fatal(err)
	}
	n := map[string]int{}
	for _, e := range events {
		n[e.Action]++
	}
	// Every key the sandbox was given is in the log: the first, and one
	// for each replaced (revoked) when an interrupted start was finished.
	if n["sandbox.create"] != 1 || n["key.create"] < 1 || n["key.create"] != 1+n["key.revoke"] {
		t.Errorf("%s: audit has %d sandbox.create, %d key.create and %d key.revoke; want 1, and one key.create more than key.revoke",
			sb.Name, n["sandbox.create"], n["key.create"], n["key.revoke"])
	}
	if who.KeyID != "" && !slices.ContainsFunc(events, func(e api.AuditEvent) bool { return e.Action == "key.create" && e.Target == who.KeyID }) {
		t.Errorf("%s: the key in its machine (%s) has no key.create entry", sb.Name, who.KeyID)
	}
}

// checkAllFinished waits until none of ids is starting, checks each as
// checkFinished does and that none left an env file, and returns their
// states in words.
func (g *gateway) checkAllFinished(t *testing.T, key string, ids []string) string {
	t.Helper()
	var states []string
	for _, sb := range g.settle(t, g.operator, ids, 3*time.Minute) {
		states = append(states, string(sb.State))
		g.checkFinished(t, key, sb)
	}
	if left := g.envFiles(t, ids); len(left) > 0 {
		t.Errorf("env files left: %v", left)
	}
	return tally(states)
}

// TestSIGTERMFinishesCreatesInFlight: SIGTERM while ten creates that
// answered 201 are starting lets every start finish before the gateway
// exits: all ten are running in the database it leaves, before any
// start-up sweep, and nothing of theirs is left on disk. An idle gateway
// stops at once.
func TestSIGTERMFinishesCreatesInFlight(t *testing.T) {
	g := startGateway(t)
	key, pub := sshKey(t)
	ids := g.createMany(t, g.operator, 10, "term", pub)
	sent := time.Now()
	if err := g.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	took := g.exited(t, sent, 5*time.Minute)
	var states []string
	for _, sb := range g.rows(t, ids) {
		states = append(states, string(sb.State))
		if sb.State != sandbox.StateRunning {
			t.Errorf("after SIGTERM %s is %s (%s), want running", sb.Name, sb.State, sb.Reason)
		}
	}
	t.Logf("SIGTERM with 10 starts in flight: the gateway exited after %s, leaving %s", took.Round(time.Millisecond), tally(states))
	if left := g.envFiles(t, ids); len(left) > 0 {
		t.Errorf("env files left after SIGTERM: %v", left)
	}

	g.start()
	t.Logf("then a restart: %s", g.checkAllFinished(t, key, ids))
	// With nothing in flight the gateway stops without waiting.
	sent = time.Now()
	if err := g.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	idle := g.exited(t, sent, time.Minute)
	t.Logf("SIGTERM with nothing in flight: the gateway exited after %s", idle.Round(time.Millisecond))
	if idle > 5*time.Second {
		t.Errorf("an idle gateway took %s to stop after SIGTERM", idle)
	}

	// A second SIGTERM exits at once, leaving what a crash leaves; the
	// next gateway finishes those starts.
	g.start()
	again := g.createMany(t, g.operator, 10, "twice", pub)
	if err := g.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	// The second once the first is taken: two signals sent closer than
	// the runtime reads them are one (a loaded machine took 10 ms apart
	// for one, and the gateway stopped gracefully).
	eventually(t, 30*time.Second, "the gateway to say it is stopping", func() bool {
		return strings.Contains(g.log.String(), "berth is stopping")
	})
	sent = time.Now()
	if err := g.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if took := g.exited(t, sent, time.Minute); took > 2*time.Second {
		t.Errorf("after a second SIGTERM the gateway took %s to exit, want at once", took)
	} else {
		t.Logf("two SIGTERMs with 10 starts in flight: the gateway exited after %s", took.Round(time.Millisecond))
	}
	g.start()
	t.Logf("then a restart: %s", g.checkAllFinished(t, key, again))
}

// TestKilledDuringCreatesFinishAfterRestart: a gateway killed with SIGKILL
// while ten creates that answered 201 are starting leaves starts that the
// next gateway finishes: all ten running, with a fresh key where the
// killed one's was lost, audited; no stray container, volume, runtime
// state or env file.
func TestKilledDuringCreatesFinishAfterRestart(t *testing.T) {
	g := startGateway(t)
	key, pub := sshKey(t)
	var all []string
	for round, after := range []time.Duration{0, 900 * time.Millisecond} {
		ids := g.createMany(t, g.operator, 10, fmt.Sprintf("kill%d", round), pub)
		time.Sleep(after)
		g.kill()
		g.start()
		t.Logf("SIGKILL %s after 10 creates answered, then a restart: %s", after, g.checkAllFinished(t, key, ids))
		all = append(all, ids...)
	}
	if stray := g.strayRuntimeState(t, all); len(stray) > 0 {
		t.Errorf("runtime state podman does not know: %v", stray)
	}
	g.checkNoStrays(t, all)
}

// checkNoStrays fails for any container or volume of the gateway's
// deployment that is not one of ids.
func (g *gateway) checkNoStrays(t *testing.T, ids []string) {
	t.Helper()
	known := map[string]bool{}
	for _, id := range ids {
		known[id] = true
	}
	deployments := map[string]bool{}
	for _, kind := range [][]string{{"ps", "--all"}, {"volume", "ls"}} {
		out := lines(g.podman(append(kind, "--format", `{{index .Labels "berth.deployment"}} {{index .Labels "berth.sandbox"}}`)...))
		for _, l := range out {
			if dep, id, _ := strings.Cut(l, " "); known[id] {
				deployments[dep] = true
			}
		}
		for _, l := range out {
			if dep, id, _ := strings.Cut(l, " "); deployments[dep] && !known[id] {
				t.Errorf("%s: an object of this deployment no row owns: %s", kind[0], id)
			}
		}
	}
}

// TestQuotaAfterFailedStarts: a failed engineer sandbox holds a slot of
// max_sandboxes only while it holds a volume (SPEC S7): one whose machine
// never started holds none; one that ran and lost its machine keeps its
// home, and its slot. The failure says why in berth's words, podman's
// after them.
func TestQuotaAfterFailedStarts(t *testing.T) {
	g := startGateway(t, "BERTH_SANDBOX_IMAGES=localhost/berth-e2e-no-such-image:latest")
	ctx := context.Background()
	_, pub := sshKey(t)
	if _, err := g.operator.ApplyClasses(ctx, "", strings.NewReader(`sandboxes:
  - name: missing
    image: localhost/berth-e2e-no-such-image:latest
    isolation: standard
    cpu: "1"
    memory: 1Gi
    purposes: [engineer]
`)); err != nil {
		t.Fatal(err)
	}
	who, err := g.operator.Whoami(ctx)
	if err != nil {
		t.Fatal(err)
	}
	two := 2
	if _, err := g.operator.SetGuardrail(ctx, who.Organisation.ID, "", api.Guardrail{MaxSandboxes: &two}); err != nil {
		t.Fatal(err)
	}
	create := func(name, class string) (api.Sandbox, error) {
		return g.operator.CreateSandbox(ctx, api.CreateSandbox{Name: name, Class: class, SSHKeys: []string{pub}})
	}

	// Never started: no volume, no slot.
	never, err := create("never", "missing")
	if err != nil {
		t.Fatal(err)
	}
	never = g.waitState(g.operator, never.ID, "failed", 2*time.Minute)
	t.Logf("a start that failed: %s", never.Reason)
	if !strings.HasPrefix(never.Reason, "its machine did not start: ") || !strings.Contains(never.Reason, "podman") {
		t.Errorf("reason %q: want berth's words first, then podman's", never.Reason)
	}
	if c, v := g.waitGone(never.ID, 30*time.Second); c != "" || v != "" {
		t.Errorf("a sandbox that never started left container %q and volume %q", c, v)
	}

	// Ran, then lost its machine: its volume and its slot stay.
	ran, err := create("ran", "standard")
	if err != nil {
		t.Fatal(err)
	}
	g.waitState(g.operator, ran.ID, "running", 2*time.Minute)
	g.podman("rm", "--force", "--time", "0", "berth-"+ran.ID)
	ran = g.waitState(g.operator, ran.ID, "failed", time.Minute)
	if _, v := g.objects(ran.ID); v != "berth-"+ran.ID {
		t.Fatalf("a failed sandbox that ran has volumes %q, want its own", v)
	}

	// Two slots: "ran" holds one, "never" none.
	third, err := create("third", "standard")
	if err != nil {
		t.Fatalf("with one failed sandbox holding a volume and one holding nothing, a create under max_sandboxes 2 = %v; want it admitted", err)
	}
	var apiErr *api.Error
	if _, err := create("fourth", "standard"); !errors.As(err, &apiErr) || apiErr.Code != api.CodeQuotaExceeded {
		t.Errorf("a fourth create = %v, want quota_exceeded: the failed sandbox with a volume holds a slot", err)
	}
	g.waitState(g.operator, third.ID, "running", 2*time.Minute)
}

// TestReplicaKilledDuringCreates: two replicas on one PostgreSQL database
// and the podman driver; the leader is killed with SIGKILL while ten
// creates it answered are starting. The other replica takes the sweep
// over and finishes every start: all ten running.
func TestReplicaKilledDuringCreates(t *testing.T) {
	root := podmanRoot(t)
	url := storetest.PostgresURL(t)
	// Engineer sandboxes need not reach the gateway to be ready.
	podman := []string{"BERTH_SANDBOX_DRIVER=podman", "BERTH_SANDBOX_PODMAN_ROOT=" + root, "BERTH_SWEEP_INTERVAL=1s"}
	a := startReplica(t, url, nil, podman...)
	b := startReplica(t, url, a, podman...)
	a.root, b.root = root, root
	t.Cleanup(func() { // before the replicas stop: no container outlives the test
		sbs, _ := b.operator.Sandboxes(context.Background(), client.ListOptions{})
		for _, sb := range sbs {
			_, _ = b.operator.Terminate(context.Background(), sb.ID)
		}
	})
	waitFor(t, "a to lead the sweep", 10*time.Second, a.leads)
	key, pub := sshKey(t)
	ids := a.createMany(t, a.operator, 10, "rep", pub)
	a.kill()
	t.Logf("the leader killed with 10 starts in flight; the other replica: %s", b.checkAllFinished(t, key, ids))
	b.checkNoStrays(t, ids)
}
