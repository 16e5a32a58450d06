package e2e_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"berth.dev/berth/internal/api"
)

// podmanPool is what a test sees of a gateway's warm pools on podman:
// the members of one class, and the claims the driver recorded.
type podmanPool struct {
	g     *gateway
	class string
	org   string // the gateway's organisation: other gateways' pools are not this one's
}

// members lists the class's pool containers (name → state).
func (p podmanPool) members() map[string]string {
	var cs []struct {
		Names  []string
		State  string
		Labels map[string]string
	}
	out := p.g.podman("ps", "--all", "--filter", "label=berth.class="+p.class, "--format", "json")
	if err := json.Unmarshal([]byte(out), &cs); err != nil {
		p.g.t.Fatalf("podman ps: %v: %s", err, out)
	}
	m := map[string]string{}
	for _, c := range cs {
		if c.Labels["berth.pool"] != "" && c.Labels["berth.org"] == p.org {
			m[c.Names[0]] = c.State
		}
	}
	return m
}

// dir is the deployment's pool directory under the podman root.
func (p podmanPool) dir() string {
	dep := p.g.podman("ps", "--all", "--filter", "label=berth.org="+p.org, "--format", "{{index .Labels \"berth.deployment\"}}")
	if dep == "" {
		return filepath.Join(p.g.root, "pools", "none")
	}
	return filepath.Join(p.g.root, "pools", strings.Fields(dep)[0])
}

// claims maps each claimed member to its sandbox, from the driver's
// records under the podman root.
func (p podmanPool) claims() map[string]string {
	files, _ := filepath.Glob(filepath.Join(p.dir(), "claims", "sbx_*"))
	m := map[string]string{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err == nil {
			m[strings.TrimSpace(string(b))] = filepath.Base(f)
		}
	}
	return m
}

// free lists the running members nobody claimed.
func (p podmanPool) free() []string {
	claimed := p.claims()
	var out []string
	for name, state := range p.members() {
		if _, ok := claimed[name]; !ok && state == "running" {
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return out
}

// machine is the member a sandbox claimed.
func (p podmanPool) machine(id string) string {
	for name, sb := range p.claims() {
		if sb == id {
			return name
		}
	}
	p.g.t.Fatalf("sandbox %s claimed no member; claims %v", id, p.claims())
	return ""
}

func (p podmanPool) ip(id string) string {
	return p.g.podman("inspect", "--format", "{{range .NetworkSettings.Networks}}{{.IPAddress}}{{end}}", p.machine(id))
}

// leftovers counts the pool's volumes and control directories, which
// must be exactly its containers'.
func (p podmanPool) leftovers() (volumes, dirs []string) {
	// One filter: podman's volume ls joins two with "or".
	for _, line := range strings.Split(p.g.podman("volume", "ls", "--filter", "label=berth.org="+p.org, "--format", "{{.Name}} {{.Labels}}"), "\n") {
		if name, labels, _ := strings.Cut(line, " "); strings.Contains(labels, "berth.pool:") {
			volumes = append(volumes, name)
		}
	}
	// Directories whose container is gone, in this deployment's.
	entries, _ := filepath.Glob(filepath.Join(p.dir(), "members", "berth-pool-*"))
	members := p.members()
	for _, e := range entries {
		if _, ok := members[filepath.Base(e)]; !ok {
			dirs = append(dirs, filepath.Base(e))
		}
	}
	slices.Sort(volumes)
	return volumes, dirs
}

// wait is eventually with the pool's state in the failure.
func (p podmanPool) wait(t *testing.T, d time.Duration, what string, ok func() bool) {
	t.Helper()
	for deadline := time.Now().Add(d); !ok(); time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			vols, dirs := p.leftovers()
			t.Fatalf("waited %s for %s; members %v, claims %v, free %v, volumes %v, directories without a container %v",
				d, what, p.members(), p.claims(), p.free(), vols, dirs)
		}
	}
}

// sshAs runs command in the sandbox at ip with key, and reports whether
// ssh got in.
func sshAs(key, ip, command string) (string, bool) {
	cmd := exec.Command("ssh", "-i", key, "-p", "2222", "-o", "StrictHostKeyChecking=no", "-o", "UserKnownHostsFile=/dev/null",
		"-o", "LogLevel=ERROR", "-o", "BatchMode=yes", "-o", "ConnectTimeout=10", "berth@"+ip, command)
	out, err := cmd.CombinedOutput()
	return strings.TrimSpace(string(out)), err == nil
}

// TestWarmPoolOnPodman: with BERTH_SANDBOX_WARM=on, an engineer class with
// warm: 2 keeps two running members whose sshd already answers and which
// hold nothing of anybody's. A create claims one (from_pool): ssh works
// with the claimer's key only, the sandbox's environment is its own, and
// berth-init, which stays, keeps its memory from the sessions. The pool
// refills; the next claim gets a machine of its own (a file written in
// the first is not there). Suspend and resume keep HOME. A class change
// replaces the unclaimed members and leaves the claimed alone. A gateway
// killed just after a create leaves no stray and no half-claimed member:
// started again, it finishes the claim. Terminate removes a claimed
// machine whole, and warm: 0 empties the pool.
func TestWarmPoolOnPodman(t *testing.T) {
	g := startGateway(t, "BERTH_SANDBOX_WARM=on")
	ctx := context.Background()
	who, err := g.operator.Whoami(ctx)
	if err != nil {
		t.Fatal(err)
	}
	p := podmanPool{g: g, class: "warmed", org: who.Organisation.ID}
	apply := func(memory string, warm int) {
		t.Helper()
		if _, err := g.operator.ApplyClasses(ctx, "", strings.NewReader(fmt.Sprintf(`sandboxes:
  - name: %s
    image: localhost/berth-sandbox:latest
    isolation: standard
    cpu: "1"
    memory: %s
    default_ttl: 1h
    max_ttl: 4h
    purposes: [engineer]
    warm: %d
`, p.class, memory, warm))); err != nil {
			t.Fatal(err)
		}
	}
	apply("1Gi", 2)
	t.Cleanup(func() {
		// Pools outlive their gateway: a test that stopped half-way
		// empties its own before the gateway stops.
		if g.cmd == nil {
			return
		}
		apply("1Gi", 0)
		p.wait(t, time.Minute, "warm: 0 to empty the pool", func() bool { return len(p.free()) == 0 })
	})
	p.wait(t, 2*time.Minute, "the pool to fill with two running members", func() bool { return len(p.free()) == 2 })
	for _, name := range p.free() {
		// Nothing of anybody's: no owner's labels, no authorized keys.
		labels := g.podman("inspect", "--format", "{{json .Config.Labels}}", name)
		if strings.Contains(labels, "berth.owner") || strings.Contains(labels, "berth.sandbox") {
			t.Errorf("member %s has a sandbox's labels: %s", name, labels)
		}
	}

	keyA, pubA := sshKey(t)
	keyB, pubB := sshKey(t)
	create := func(name, pub string) api.Sandbox {
		t.Helper()
		sb, err := g.operator.CreateSandbox(ctx, api.CreateSandbox{Name: name, Class: p.class, SSHKeys: []string{pub}})
		if err != nil {
			t.Fatal(err)
		}
		return sb
	}
	a := g.waitState(g.operator, create("a", pubA).ID, "running", time.Minute)
	if !a.FromPool {
		t.Fatalf("sandbox a is not from the pool: %+v", a)
	}
	ipA := p.ip(a.ID)
	out, ok := sshAs(keyA, ipA, "id -u; echo $BERTH_SANDBOX_NAME; echo mine > ~/mine; cat /proc/1/environ >/dev/null 2>&1 && echo readable || echo closed")
	if want := "1001\na\nclosed"; !ok || out != want {
		t.Errorf("in sandbox a: %q (ok %v), want %q", out, ok, want)
	}
	if out, ok := sshAs(keyB, ipA, "true"); ok {
		t.Errorf("another key got into sandbox a: %s", out)
	}
	p.wait(t, time.Minute, "the pool to refill to two", func() bool { return len(p.free()) == 2 })

	b := g.waitState(g.operator, create("b", pubB).ID, "running", time.Minute)
	ipB := p.ip(b.ID)
	if p.machine(b.ID) == p.machine(a.ID) {
		t.Fatalf("a and b share the machine %s", p.machine(a.ID))
	}
	if out, ok := sshAs(keyB, ipB, "test -e ~/mine && echo leaked || echo clean; echo $BERTH_SANDBOX_NAME"); !ok || out != "clean\nb" {
		t.Errorf("in sandbox b: %q (ok %v), want clean and its own name", out, ok)
	}
	if out, ok := sshAs(keyA, ipB, "true"); ok {
		t.Errorf("a's key got into sandbox b: %s", out)
	}

	if _, err := g.operator.Suspend(ctx, a.ID); err != nil {
		t.Fatal(err)
	}
	p.wait(t, time.Minute, "a's machine to stop", func() bool { return p.members()[p.machine(a.ID)] == "exited" })
	if _, err := g.operator.Resume(ctx, a.ID); err != nil {
		t.Fatal(err)
	}
	g.waitState(g.operator, a.ID, "running", time.Minute)
	// Running is sshd answering through the tunnel's handoff; podman may
	// show the restarted machine's bridge address a moment later (CI saw
	// it empty once).
	p.wait(t, time.Minute, "a's machine to have an address again", func() bool { return p.ip(a.ID) != "" })
	if out, ok := sshAs(keyA, p.ip(a.ID), "cat ~/mine"); !ok || out != "mine" {
		t.Errorf("after suspend and resume: %q (ok %v), want ~/mine kept", out, ok)
	}

	p.wait(t, time.Minute, "the pool to refill to two again", func() bool { return len(p.free()) == 2 })
	before := p.free()
	apply("768Mi", 2)
	p.wait(t, 2*time.Minute, "the class change to replace the free members", func() bool {
		free := p.free()
		return len(free) == 2 && !slices.Contains(free, before[0]) && !slices.Contains(free, before[1])
	})
	for _, name := range p.free() {
		if mem := g.podman("inspect", "--format", "{{.HostConfig.Memory}}", name); mem != fmt.Sprint(768<<20) {
			t.Errorf("member %s after the change has memory %s", name, mem)
		}
	}
	if out, ok := sshAs(keyB, ipB, "echo still"); !ok || out != "still" {
		t.Errorf("the class change touched the claimed sandbox b: %q", out)
	}

	// Killed right after a create answered: the claim is under way, or
	// done, or not begun; whichever, nothing is left half-way.
	keyC, pubC := sshKey(t)
	c := create("c", pubC)
	g.kill()
	g.start()
	g.waitState(g.operator, c.ID, "running", time.Minute)
	if out, ok := sshAs(keyC, p.ip(c.ID), "echo $BERTH_SANDBOX_NAME"); !ok || out != "c" {
		t.Errorf("in sandbox c after the gateway's restart: %q (ok %v)", out, ok)
	}
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(100 * time.Millisecond) {
		ms, claimed, free := p.members(), p.claims(), p.free()
		vols, dirs := p.leftovers()
		if len(ms) == 5 && len(claimed) == 3 && len(free) == 2 && len(vols) == 5 && len(dirs) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after the restart, want three claimed and two free members, all running, nothing else; have members %v, claims %v, free %v, volumes %v, directories without a container %v",
				ms, claimed, free, vols, dirs)
		}
	}

	for _, sb := range []api.Sandbox{a, b, c} {
		name := p.machine(sb.ID)
		if _, err := g.operator.Terminate(ctx, sb.ID); err != nil {
			t.Fatal(err)
		}
		if _, ok := p.members()[name]; ok {
			t.Errorf("terminate left %s's machine %s", sb.Name, name)
		}
	}
	if len(p.claims()) != 0 {
		t.Errorf("claims left after terminate: %v", p.claims())
	}
	apply("768Mi", 0)
	p.wait(t, time.Minute, "warm: 0 to empty the pool", func() bool {
		vols, _ := p.leftovers()
		return len(p.members()) == 0 && len(vols) == 0
	})
}
