package podman_test

import (
	"context"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"berth.dev/berth/internal/driver/podman"
)

// TestPoolsKeepToTheirDeployment: with pools off, the driver removes its
// own pool members, and never another deployment's, nor a sandbox's,
// though podman hands it theirs: `podman volume ls` joins two label
// filters with "or", so a listing by deployment and pool label brought
// every deployment's pool volumes, and a gateway took them for its own
// half-made members and removed them with their containers (claimed
// sandboxes of other gateways on the same host among them).
func TestPoolsKeepToTheirDeployment(t *testing.T) {
	const mine, theirs = "berth-pool-mine00000000", "berth-pool-theirs000000"
	ctr := func(name, dep string, pool bool) string {
		labels := `"berth.deployment": "` + dep + `"`
		if pool {
			labels += `, "berth.pool": "org_1.standard", "berth.pool-spec": "x"`
		}
		return `{"Names": ["` + name + `"], "Name": "` + name + `", "State": "running", "Labels": {` + labels + `}}`
	}
	var mu sync.Mutex
	var removed []string
	run := func(_ context.Context, _ []string, args ...string) ([]byte, error) {
		mu.Lock()
		defer mu.Unlock()
		switch {
		case args[0] == "ps":
			// Whatever the filter, podman answers with more than asked.
			return []byte("[" + ctr(mine, "d1", true) + "," + ctr(theirs, "d2", true) + "," + ctr("berth-sbx_1", "d1", false) + "]"), nil
		case args[0] == "volume" && args[1] == "ls":
			return []byte("[" + ctr(mine, "d1", true) + "," + ctr(theirs, "d2", true) + "]"), nil
		case args[0] == "rm" || (args[0] == "volume" && args[1] == "rm"):
			removed = append(removed, args[len(args)-1])
		}
		return nil, nil
	}
	d := podman.NewWithRunner(podman.Config{StateDir: t.TempDir(), Deployment: "d1"}, slog.New(slog.DiscardHandler), run)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := d.SyncPools(ctx, nil); err != nil {
		t.Fatal(err)
	}
	if err := d.PoolsKept(ctx); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if slices.ContainsFunc(removed, func(n string) bool { return n != mine }) || !slices.Contains(removed, mine) {
		t.Errorf("removed %s; want %s's container and volume alone", strings.Join(removed, ", "), mine)
	}
}
