package podman

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"berth.dev/berth/internal/class"
	"berth.dev/berth/internal/fault"
	"berth.dev/berth/internal/handoff"
	"berth.dev/berth/internal/sandbox"
	"berth.dev/berth/internal/secret"
	"berth.dev/berth/internal/warm"
)

// Warm pools on podman (SPEC S12). A pool member is a running container of
// the class, with its own empty home volume, whose sshd already answers:
// berth-init started it before any claim (warm mode: BERTH_READY_FILE),
// with no authorized keys and only the pool's environment, so it holds
// nothing of anybody's, and no owner's labels either. Each member has a
// control directory on the host, mounted at /run/berth and owned by the
// sandbox user, through which a claim reaches it: the driver writes the
// claim's one-time token there (the file berth-init watches), berth-init
// trades it at the gateway for the sandbox's environment and a fresh key,
// writes HOME, and answers by creating the ready file.
//
// The home volume is made with the member, not attached at claim: podman
// cannot add a mount to a running container, and a container made at
// claim is a cold start. A claimed member is the sandbox's for good: its
// volume is the sandbox's home, kept by suspend, removed by terminate;
// nothing goes back to a pool.
//
// podman cannot change a container's labels or a volume's name, so the
// claim is recorded by the driver: a file per claimed sandbox under the
// deployment's pool directory naming its member, written (and synced)
// before the token, and read at every start of the driver. A gateway
// killed mid-claim leaves either an unclaimed member, which the pool keeps,
// or a claimed one, which the sandbox's next start (the sweep finishing it
// with a new token) takes up again: never one half-claimed.

// The pool labels, on a member's container and volume.
const (
	labelPool     = "berth.pool"      // its pool: organisation and class
	labelPoolSpec = "berth.pool-spec" // what it was made from; a class change replaces it
	labelClass    = "berth.class"
)

// memberPrefix begins every member's container, volume and directory
// name; ctlMount is where its control directory is in the container.
const (
	memberPrefix = "berth-pool-"
	ctlMount     = "/run/berth"
	claimFile    = "claim" // the token, as berth-init reads it
	readyFile    = "ready" // berth-init's answer
)

// claimPoll is how often a claim looks for the ready file.
const claimPoll = 2 * time.Millisecond

// memberState is where a member is in its life.
type memberState int

const (
	memberStarting memberState = iota // made or found; sshd not seen yet
	memberReady                       // sshd answered: it may be claimed
	memberTaken                       // being claimed: nobody else's
	memberRemoving                    // being removed
)

type member struct {
	name  string
	pool  string // poolKey
	spec  string // specHash
	state memberState
	ip    string
}

// wanted is one pool as the classes want it.
type wanted struct {
	pool warm.Pool
	key  string
	spec string
}

// pools is the driver's memory of its warm pools.
type pools struct {
	mu      sync.Mutex
	want    map[string]wanted     // by poolKey
	members map[string]*member    // unclaimed members, by name
	claims  map[sandbox.ID]string // claimed members, by sandbox
	keeping bool                  // a keepPools runs
	again   bool                  // and must run once more when done
	idle    bool                  // the last keepPools found no pool, member or claim
}

var _ warm.Pools = (*Driver)(nil)

func poolKey(org, className string) string { return org + "." + className }

func (c Config) poolDir() string {
	return filepath.Join(c.StateDir, "pools", strings.ReplaceAll(c.Deployment, string(filepath.Separator), "_"))
}
func (c Config) claimsDir() string            { return filepath.Join(c.poolDir(), "claims") }
func (c Config) memberDir(name string) string { return filepath.Join(c.poolDir(), "members", name) }

// poolOf is the pool a sandbox of a warm class comes from: what a member
// is made of is what the sandbox's row keeps of its class.
func poolOf(sb sandbox.Sandbox) warm.Pool {
	return warm.Pool{Org: sb.Org, Runtime: sb.Runtime, Class: class.Class{
		Name: sb.Class, Image: sb.Image, CPU: sb.CPU, Memory: sb.Memory, Disk: sb.Disk, Isolation: sb.Isolation,
	}}
}

// MemberArgs is `podman run` for a member of pool p named name: RunArgs'
// hardening and limits, the pool's labels and none of an owner's, its own
// volume as HOME, its control directory at /run/berth, and its
// environment by name only (envFile).
//
// handoffDir is as for RunArgs.
func MemberArgs(c Config, p warm.Pool, name, ctlDir, envFile, handoffDir string) []string {
	c = c.withDefaults()
	args := []string{"run", "--detach", "--name", name, "--hostname", p.Class.Name}
	args = append(args, c.memberLabels(p)...)
	args = append(args, c.engineerMachine(p.Class.CPU, p.Class.Memory, name)...)
	args = append(args, "--volume", ctlDir+":"+ctlMount)
	args = append(args, handoffMount(handoffDir)...)
	args = append(args, c.engineerPlace(p.Runtime, envFile)...)
	return append(args, p.Class.Image)
}

// memberLabels are a member's: the deployment's and the pool's.
func (c Config) memberLabels(p warm.Pool) []string {
	var args []string
	for _, kv := range [][2]string{
		{labelDeployment, c.Deployment}, {labelPool, poolKey(p.Org, p.Class.Name)}, {labelPoolSpec, c.specHash(p)},
		{labelOrg, p.Org}, {labelClass, p.Class.Name}, {labelPurpose, string(sandbox.PurposeEngineer)},
	} {
		args = append(args, "--label", kv[0]+"="+kv[1])
	}
	return args
}

// memberEnv is a member's whole environment: where the gateway is, and
// where the claim comes. Nothing in it is anybody's.
func (c Config) memberEnv(p warm.Pool) map[string]string {
	return map[string]string{
		"BERTH_BASE_URL":        strings.TrimSuffix(c.PublicURL, "/"),
		"BERTH_SANDBOX_PURPOSE": string(sandbox.PurposeEngineer),
		"BERTH_SANDBOX_CLASS":   p.Class.Name,
		"BERTH_BOOTSTRAP_FILE":  ctlMount + "/" + claimFile,
		"BERTH_READY_FILE":      ctlMount + "/" + readyFile,
		handoff.EnvSocket:       handoffSocket,
	}
}

// specHash sums what a member is made from (its run's flags and
// environment, the image by name): a member of another sum is not the
// class's any more.
func (c Config) specHash(p warm.Pool) string {
	h := sha256.New()
	c.Deployment = ""
	args := []string{"run", p.Class.Image, p.Runtime, c.Network, itoa(c.PidsLimit), fmt.Sprint(int64(p.Class.Memory)),
		fmt.Sprintf("%.3f", p.Class.CPU.Cores()), itoa(int(c.withDefaults().StopTimeout.Seconds()))}
	env := c.memberEnv(p)
	for _, k := range slices.Sorted(maps.Keys(env)) {
		args = append(args, k+"="+env[k])
	}
	for _, a := range args {
		h.Write([]byte(a))
		h.Write([]byte{0})
	}
	return hex.EncodeToString(h.Sum(nil))[:16]
}

// loadClaims reads the claims this deployment recorded.
func (d *Driver) loadClaims() error {
	d.pool.claims = map[sandbox.ID]string{}
	d.pool.members = map[string]*member{}
	entries, err := os.ReadDir(d.cfg.claimsDir())
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("podman: warm pool claims: %w", err)
	}
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), ".") {
			continue // a claim being written when the gateway stopped: never used
		}
		b, err := os.ReadFile(filepath.Join(d.cfg.claimsDir(), e.Name()))
		if err != nil {
			return fmt.Errorf("podman: warm pool claims: %w", err)
		}
		if name := strings.TrimSpace(string(b)); strings.HasPrefix(name, memberPrefix) {
			d.pool.claims[sandbox.ID(e.Name())] = name
		}
	}
	return nil
}

// nameOf is the container's (and volume's) name of sandbox id: its
// member's when it came from a pool.
func (d *Driver) nameOf(id sandbox.ID) string {
	d.pool.mu.Lock()
	defer d.pool.mu.Unlock()
	if name, ok := d.pool.claims[id]; ok {
		return name
	}
	return d.cfg.name(id)
}

// claimedBy is the sandbox that claimed member name, if one did.
func (d *Driver) claimedBy(name string) (sandbox.ID, bool) {
	d.pool.mu.Lock()
	defer d.pool.mu.Unlock()
	for id, n := range d.pool.claims {
		if n == name {
			return id, true
		}
	}
	return "", false
}

// SyncPools makes the pools those of pools (SPEC S12): members of a pool
// no longer wanted, or made from what its class no longer is, are removed
// and missing ones made, in the background, so that neither a class's
// change nor the sweep waits for containers to start. Claimed members are
// sandboxes and untouched.
func (d *Driver) SyncPools(ctx context.Context, ps []warm.Pool) error {
	want := map[string]wanted{}
	for _, p := range ps {
		k := poolKey(p.Org, p.Class.Name)
		want[k] = wanted{pool: p, key: k, spec: d.cfg.specHash(p)}
	}
	d.pool.mu.Lock()
	// With no pool wanted, none kept and none claimed, one keeping (at
	// the first sync, for what an earlier gateway left) is enough: the
	// sweep's every tick need not ask podman for pools nobody has.
	idle := len(want) == 0 && d.pool.idle && len(d.pool.claims) == 0 && len(d.pool.members) == 0
	d.pool.want = want
	d.pool.mu.Unlock()
	if !idle {
		d.keep()
	}
	return nil
}

// PoolsKept waits until no keeping of the pools runs (tests).
func (d *Driver) PoolsKept(ctx context.Context) error {
	for {
		d.pool.mu.Lock()
		busy := d.pool.keeping
		d.pool.mu.Unlock()
		if !busy {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// keep runs keepPools in the background, once more if asked while one
// runs.
func (d *Driver) keep() {
	d.pool.mu.Lock()
	if d.pool.keeping {
		d.pool.again = true
		d.pool.mu.Unlock()
		return
	}
	d.pool.keeping = true
	d.pool.mu.Unlock()
	go func() {
		for {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
			if err := d.keepPools(ctx); err != nil {
				d.log.Warn("warm pools not kept", "err", err)
			}
			cancel()
			d.pool.mu.Lock()
			if !d.pool.again {
				d.pool.keeping = false
				d.pool.mu.Unlock()
				return
			}
			d.pool.again = false
			d.pool.mu.Unlock()
		}
	}()
}

// poolObject is a pool container or volume as podman lists it.
type poolObject struct {
	Names  []string // containers
	Name   string   // volumes
	Labels map[string]string
	State  string
}

func (o poolObject) name() string {
	if len(o.Names) > 0 {
		return o.Names[0]
	}
	return o.Name
}

// keepPools brings podman in step with the wanted pools: members that
// stopped, are too many, or belong to no wanted pool or an old form of
// one are removed with their volume and directory; what a stopped gateway
// left half-made goes too; members found running are taken in once sshd
// answers; missing ones are made, one at a time.
func (d *Driver) keepPools(ctx context.Context) error {
	d.pool.mu.Lock()
	synced := d.pool.want != nil
	d.pool.mu.Unlock()
	if !synced {
		return nil // nothing is known of the classes yet: keep everything
	}
	ctrs, vols, err := d.listPools(ctx)
	if err != nil {
		return err
	}

	var remove, verify []string
	d.pool.mu.Lock()
	claimed := map[string]bool{}
	for _, n := range d.pool.claims {
		claimed[n] = true
	}
	seen := map[string]bool{}
	count := map[string]int{}
	for _, c := range ctrs {
		name := c.name()
		seen[name] = true
		if claimed[name] {
			continue
		}
		m, known := d.pool.members[name]
		if known && (m.state == memberTaken || m.state == memberRemoving || (m.state == memberStarting && m.ip == "" && c.State != "exited")) {
			if m.state != memberRemoving {
				count[m.pool]++
			}
			continue
		}
		w, ok := d.pool.want[c.Labels[labelPool]]
		keep := ok && c.State == "running" && c.Labels[labelPoolSpec] == w.spec && count[w.key] < w.pool.Class.Warm
		if !keep {
			d.log.DebugContext(ctx, "warm pool member to remove", "member", name, "state", c.State, "pool", c.Labels[labelPool],
				"wanted", ok, "spec", c.Labels[labelPoolSpec] == w.spec, "count", count[w.key], "known", known)
			if known {
				m.state = memberRemoving
			} else {
				d.pool.members[name] = &member{name: name, state: memberRemoving}
			}
			remove = append(remove, name)
			continue
		}
		count[w.key]++
		if !known {
			d.pool.members[name] = &member{name: name, pool: w.key, spec: w.spec, state: memberStarting}
			verify = append(verify, name)
		}
	}
	for name, m := range d.pool.members {
		if !seen[name] && m.state != memberTaken && !(m.state == memberStarting && m.ip == "") {
			delete(d.pool.members, name) // gone from podman: nothing to keep
		}
	}
	// A volume or directory without its container: a member half-made, or
	// half-removed, by a gateway that stopped.
	for _, v := range vols {
		if name := v.name(); !seen[name] && !claimed[name] && d.pool.members[name] == nil {
			d.log.DebugContext(ctx, "warm pool volume without its container to remove", "member", name)
			remove = append(remove, name)
		}
	}
	if entries, err := os.ReadDir(filepath.Join(d.cfg.poolDir(), "members")); err == nil {
		for _, e := range entries {
			name := e.Name()
			if !seen[name] && !claimed[name] && d.pool.members[name] == nil && !slices.Contains(remove, name) {
				d.log.DebugContext(ctx, "warm pool directory without its container to remove", "member", name)
				remove = append(remove, name)
			}
		}
	}
	var toMake []wanted
	for _, w := range d.pool.want {
		for range w.pool.Class.Warm - count[w.key] {
			toMake = append(toMake, w)
		}
	}
	d.pool.mu.Unlock()

	var errs []error
	for _, name := range remove {
		if err := d.removeMember(ctx, name); err != nil {
			errs = append(errs, err)
		}
	}
	for _, name := range verify {
		if err := d.memberUp(ctx, name); err != nil {
			errs = append(errs, fmt.Errorf("warm pool member %s: %w", name, err))
			d.forgetMember(name)
		}
	}
	for _, w := range toMake {
		if _, err := d.makeMember(ctx, w.pool, w.spec, memberStarting); err != nil {
			errs = append(errs, err)
		}
	}
	d.pool.mu.Lock()
	idle := len(d.pool.want) == 0 && len(d.pool.claims) == 0 && len(d.pool.members) == 0 && len(errs) == 0
	d.pool.idle = idle
	d.pool.mu.Unlock()
	if idle {
		// No pool and no claim left: the deployment's directories go too
		// (each fails, harmlessly, while anything is in it).
		for _, dir := range []string{filepath.Join(d.cfg.poolDir(), "members"), d.cfg.claimsDir(), d.cfg.poolDir()} {
			_ = os.Remove(dir)
		}
	}
	return errors.Join(errs...)
}

// listPools lists the deployment's pool containers and volumes. One
// label filter only: podman's volume ls joins two with "or", which would
// hand this deployment another's members to remove.
func (d *Driver) listPools(ctx context.Context) (ctrs, vols []poolObject, err error) {
	filter := "label=" + labelDeployment + "=" + d.cfg.Deployment
	var all []poolObject
	out, err := d.run(ctx, nil, "ps", "--all", "--format", "json", "--filter", filter)
	if err != nil {
		return nil, nil, err
	}
	if err := json.Unmarshal(orEmpty(out), &all); err != nil {
		return nil, nil, fmt.Errorf("podman ps: unexpected answer: %w", err)
	}
	for _, c := range all {
		if c.Labels[labelPool] != "" && c.Labels[labelDeployment] == d.cfg.Deployment {
			ctrs = append(ctrs, c)
		}
	}
	all = nil
	if out, err = d.run(ctx, nil, "volume", "ls", "--format", "json", "--filter", filter); err != nil {
		return nil, nil, err
	}
	if err := json.Unmarshal(orEmpty(out), &all); err != nil {
		return nil, nil, fmt.Errorf("podman volume ls: unexpected answer: %w", err)
	}
	for _, v := range all {
		if v.Labels[labelPool] != "" && v.Labels[labelDeployment] == d.cfg.Deployment {
			vols = append(vols, v)
		}
	}
	return ctrs, vols, nil
}

// removeMember removes an unclaimed member: container, volume, directory.
func (d *Driver) removeMember(ctx context.Context, name string) error {
	defer d.forgetMember(name)
	if _, err := d.run(ctx, nil, "rm", "--force", "--time", "0", name); err != nil && !noSuch(err) {
		return err
	}
	if _, err := d.run(ctx, nil, "volume", "rm", "--force", name); err != nil && !noSuch(err) {
		return err
	}
	if err := os.RemoveAll(d.cfg.memberDir(name)); err != nil {
		return fmt.Errorf("podman: warm pool member %s: %w", name, err)
	}
	d.closeHandoff(ctx, name)
	d.log.InfoContext(ctx, "warm pool member removed", "member", name)
	return nil
}

func (d *Driver) forgetMember(name string) {
	d.pool.mu.Lock()
	if m := d.pool.members[name]; m != nil && m.state != memberTaken {
		delete(d.pool.members, name)
	}
	d.pool.mu.Unlock()
}

// makeMember makes a member of p and waits until its sshd answers. It is
// known (in state, memberStarting for the pool, memberTaken for a claim
// that found none ready) from before its container exists, so that no
// keepPools takes it for a stray meanwhile. One that fails is removed.
func (d *Driver) makeMember(ctx context.Context, p warm.Pool, spec string, state memberState) (*member, error) {
	name := memberPrefix + strings.ToLower(rand.Text()[:12])
	m := &member{name: name, pool: poolKey(p.Org, p.Class.Name), spec: spec, state: state}
	d.pool.mu.Lock()
	d.pool.members[name] = m
	d.pool.mu.Unlock()
	if err := d.startMember(ctx, p, name); err != nil {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		d.pool.mu.Lock()
		m.state = memberRemoving
		d.pool.mu.Unlock()
		if rmErr := d.removeMember(cctx, name); rmErr != nil {
			d.log.WarnContext(ctx, "a warm pool member that failed to start was not removed", "member", name, "err", rmErr)
		}
		return nil, fmt.Errorf("warm pool %s: %w", m.pool, err)
	}
	if err := d.memberUp(ctx, name); err != nil {
		return nil, fmt.Errorf("warm pool %s: %w", m.pool, err)
	}
	d.log.InfoContext(ctx, "warm pool member ready", "member", name, "pool", m.pool)
	return m, nil
}

// startMember makes a member's directory, volume and container.
func (d *Driver) startMember(ctx context.Context, p warm.Pool, name string) error {
	dir := d.cfg.memberDir(name)
	if err := os.MkdirAll(filepath.Dir(dir), 0o700); err != nil {
		return err
	}
	if err := os.Mkdir(dir, 0o700); err != nil {
		return err
	}
	// The sandbox user's: berth-init removes the token it read and
	// writes its answer there.
	if err := os.Chown(dir, sandboxUID, sandboxUID); err != nil {
		return err
	}
	vol := append([]string{"volume", "create"}, d.cfg.memberLabels(p)...)
	if _, err := d.run(ctx, nil, append(vol, name)...); err != nil {
		return err
	}
	env := d.cfg.memberEnv(p)
	handoffDir := d.openHandoff(ctx, name)
	if handoffDir == "" {
		delete(env, handoff.EnvSocket)
	}
	body, _ := splitEnv(env)
	envFile, err := writeEnvFile(d.cfg.envDir(), sandbox.ID(name), body)
	if err != nil {
		return fmt.Errorf("podman: env file: %w", err)
	}
	_, err = d.run(ctx, nil, MemberArgs(d.cfg, p, name, dir, envFile.name(), handoffDir)...)
	if rmErr := envFile.remove(); rmErr != nil {
		d.log.WarnContext(ctx, "env file not removed", "member", name, "err", rmErr)
	}
	return err
}

// memberUp waits until a member's sshd answers, and keeps its address.
func (d *Driver) memberUp(ctx context.Context, name string) error {
	ip, err := d.waitGreeting(ctx, name, sandbox.PurposeEngineer)
	if err != nil {
		return err
	}
	d.pool.mu.Lock()
	defer d.pool.mu.Unlock()
	if m := d.pool.members[name]; m != nil {
		m.ip = ip
		if m.state == memberStarting {
			m.state = memberReady
		}
	}
	return nil
}

// take claims a ready member of sb's pool for sb, or with none ready
// makes one (as slow as a cold start): the claim is recorded before it
// returns, and the pool is refilled in the background.
func (d *Driver) take(ctx context.Context, sb sandbox.Sandbox) (*member, error) {
	p := poolOf(sb)
	key, spec := poolKey(p.Org, p.Class.Name), d.cfg.specHash(p)
	defer d.keep()
	var m *member
	for m == nil {
		var c *member
		d.pool.mu.Lock()
		for _, cand := range d.pool.members {
			if cand.pool == key && cand.spec == spec && cand.state == memberReady {
				cand.state, c = memberTaken, cand
				break
			}
		}
		d.pool.mu.Unlock()
		if c == nil {
			break
		}
		// Ready when last seen; a member that died since (out of memory,
		// killed) is not handed out: the pool's keeping removes it. A
		// connection its sshd accepts says so; its greeting, which comes
		// from a process sshd starts for the connection, is waited for
		// once the claim is handed over, beside berth-init's work.
		if d.listens(ctx, net.JoinHostPort(c.ip, strconv.Itoa(sshPort))) {
			m = c
			break
		}
		// Forgotten, it is looked at again as one found running: kept
		// once sshd answers, removed once it stops.
		d.pool.mu.Lock()
		delete(d.pool.members, c.name)
		d.pool.mu.Unlock()
		d.log.WarnContext(ctx, "a warm pool member stopped answering: not claimed", "member", c.name)
	}
	if m == nil {
		d.log.InfoContext(ctx, "no warm pool member ready: making one", "sandbox", sb.ID, "pool", key)
		var err error
		if m, err = d.makeMember(ctx, p, spec, memberTaken); err != nil {
			return nil, err
		}
	}
	if err := d.recordClaim(sb.ID, m.name); err != nil {
		d.pool.mu.Lock()
		m.state = memberReady // it holds nothing yet: the pool keeps it
		d.pool.mu.Unlock()
		return nil, err
	}
	d.pool.mu.Lock()
	delete(d.pool.members, m.name)
	d.pool.claims[sb.ID] = m.name
	d.pool.mu.Unlock()
	return m, nil
}

// recordClaim writes, and syncs, that member name is sandbox id's.
func (d *Driver) recordClaim(id sandbox.ID, name string) error {
	dir := d.cfg.claimsDir()
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("podman: record the claim: %w", err)
	}
	if err := replaceFile(filepath.Join(dir, string(id)), []byte(name+"\n")); err != nil {
		return fmt.Errorf("podman: record the claim: %w", err)
	}
	return syncDir(dir)
}

func syncDir(dir string) error {
	f, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer f.Close()
	return f.Sync()
}

// forgetClaim removes a removed sandbox's claim.
func (d *Driver) forgetClaim(ctx context.Context, id sandbox.ID) error {
	d.pool.mu.Lock()
	name, ok := d.pool.claims[id]
	d.pool.mu.Unlock()
	if !ok {
		return nil
	}
	if err := os.RemoveAll(d.cfg.memberDir(name)); err != nil {
		return err
	}
	if err := os.Remove(filepath.Join(d.cfg.claimsDir(), string(id))); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	d.pool.mu.Lock()
	delete(d.pool.claims, id)
	d.pool.mu.Unlock()
	d.log.InfoContext(ctx, "warm pool claim removed with its sandbox", "sandbox", id, "member", name)
	return nil
}

// startFromPool is Start for a sandbox of a warm pool (spec.Bootstrap):
// its member claimed now, or, claimed before (a resume, or a start the
// gateway's stop interrupted), started again if it stopped; either way
// handed the token and waited for until berth-init says the sandbox is
// ready.
func (d *Driver) startFromPool(ctx context.Context, spec sandbox.Spec) error {
	sb := spec.Sandbox
	d.pool.mu.Lock()
	name, claimed := d.pool.claims[sb.ID]
	d.pool.mu.Unlock()
	var ip string
	running := true
	if !claimed {
		m, err := d.take(ctx, sb)
		if err != nil {
			return err
		}
		name, ip = m.name, m.ip
	} else {
		cur, err := d.inspectName(ctx, name)
		if errors.Is(err, fault.NotFound) {
			return fault.Errorf(fault.NotFound, "podman: the warm pool machine %s of %s is gone", name, sb.ID)
		}
		if err != nil {
			return err
		}
		running = cur.State.Running
		ip = cur.ip()
	}
	dir := d.cfg.memberDir(name)
	served := false
	if running && claimed {
		// A gateway stopped after the machine had taken up the sandbox
		// (its ready file is there): it waits for no token now.
		_, err := os.Lstat(filepath.Join(dir, readyFile))
		served = err == nil
	}
	if !served {
		if err := handOver(dir, spec.Bootstrap); err != nil {
			return fmt.Errorf("podman: hand the claim to %s: %w", name, err)
		}
	}
	// sshd answers while berth-init takes up the sandbox: its greeting is
	// waited for meanwhile.
	greeted := make(chan bool, 1)
	if running && ip != "" {
		go func() { greeted <- d.greets(ctx, net.JoinHostPort(ip, strconv.Itoa(sshPort))) }()
	}
	if !running {
		d.forgetAddrs()
		if _, err := d.run(ctx, nil, "start", name); err != nil {
			return err
		}
		ip = ""
	}
	if err := d.waitClaimed(ctx, sb, name, dir); err != nil {
		return err
	}
	// A token handed to a machine that had already taken one (a gateway
	// stopped while it fetched its environment) is never read: it goes.
	if err := os.Remove(filepath.Join(dir, claimFile)); err != nil && !errors.Is(err, os.ErrNotExist) {
		d.log.WarnContext(ctx, "an unread bootstrap token was not removed", "sandbox", sb.ID, "member", name, "err", err)
	}
	if running && ip != "" {
		if !<-greeted {
			return fmt.Errorf("sshd of %s stopped answering", name)
		}
	} else {
		var err error
		if ip, err = d.waitGreeting(ctx, name, sandbox.PurposeEngineer); err != nil {
			return err
		}
	}
	d.mu.Lock()
	if d.ips == nil {
		d.ips = map[sandbox.ID]string{}
	}
	d.ips[sb.ID] = ip
	d.mu.Unlock()
	return nil
}

// handOver writes token where the member's berth-init waits for it,
// after removing the last start's ready file. The directory is the
// sandbox's after a first claim, so nothing in it is followed: the file
// is made anew beside (O_EXCL, O_NOFOLLOW) and renamed over the name,
// which replaces whatever is there rather than writing through it.
func handOver(dir string, token secret.Secret) error {
	if err := os.Remove(filepath.Join(dir, readyFile)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	tmp := filepath.Join(dir, ".claim.new")
	if err := os.Remove(tmp); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW, 0o644)
	if err != nil {
		return err
	}
	_, err = f.WriteString("berth.dev/bootstrap-token=" + strconv.Quote(token.Reveal()) + "\n")
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	return os.Rename(tmp, filepath.Join(dir, claimFile))
}

// waitClaimed waits for berth-init's ready file, asking podman now and
// then whether the container still runs.
func (d *Driver) waitClaimed(ctx context.Context, sb sandbox.Sandbox, name, dir string) error {
	ctx, cancel := context.WithTimeout(ctx, d.cfg.ReadyTimeout)
	defer cancel()
	checked := time.Now()
	for {
		if _, err := os.Lstat(filepath.Join(dir, readyFile)); err == nil {
			return nil
		}
		if time.Since(checked) >= readyRecheck {
			cur, err := d.inspectName(ctx, name)
			if err != nil {
				return err
			}
			if !cur.State.Running {
				return fmt.Errorf("its process exited %d before it was ready%s", cur.State.ExitCode, d.lastWordsOf(ctx, name, cur))
			}
			checked = time.Now()
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("the warm pool machine %s did not take up sandbox %s within %s", name, sb.ID, d.cfg.ReadyTimeout)
		case <-time.After(claimPoll):
		}
	}
}
