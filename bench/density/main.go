// Command density measures what idle engineer sandboxes cost on one host
// and how the API answers with many sandbox rows (issue 21's density
// figures), and hands each figure to bench/all (bench/internal/report).
// bench/density.sh starts the podman gateway and runs this.
//
// What is measured, in two parts (-parts):
//
//   - podman: on the gateway of -gateway-pid (the podman driver, BERTH_URL
//     and BERTH_API_KEY), the gateway's RSS (VmRSS) with no sandbox, then
//     -sandboxes engineer sandboxes of -class are created through the API
//     and left idle for -settle, then its RSS again: -n samples a second
//     apart each time, medians, and their ratio. Then the memory of each
//     idle sandbox: its container's memory cgroup (what runc made, found
//     from /proc/PID/cgroup of the container's first process) less the
//     kernel's own memory charged to it (cgroup v1: memory.usage_in_bytes
//     − memory.kmem.usage_in_bytes, which is memory.stat's rss + cache:
//     the anonymous pages and the page cache it holds), plus the VmRSS of
//     its conmon (counted whole, though most of it is shared library
//     pages: its PSS is printed beside it); the median over the
//     sandboxes, and the kernel's part beside it. The sandboxes are
//     terminated at the end.
//   - lists: two scratch gateways of -berth on the fake driver and SQLite,
//     one holding -rows sandboxes and the baseline -small, every one made
//     through the API (the fake driver makes a create cheap, and the rows
//     are what the gateway itself writes). Rounds alternate between the
//     two so drift in the machine's load touches both alike; a round is
//     -requests lists (GET /sandbox/v1/sandboxes as the operator, whose
//     list is every live sandbox: the first page at the default limit,
//     what `berth sandbox list` asks first) and -requests
//     shows (GET /sandbox/v1/sandboxes/NAME of a random sandbox), one at a
//     time, alternating. Figures: p50 and p99 of each round, medians of
//     -n rounds, and each gateway's RSS after the rounds (what its creates
//     and lists left it holding).
//
// Every figure goes out with the machine's load (/proc/loadavg) over the
// time it was measured.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"
	"time"

	"berth.dev/berth/bench/internal/report"
)

func main() {
	var o options
	flag.IntVar(&o.n, "n", 5, "rounds of list and show latency, and samples of the gateway's RSS")
	flag.StringVar(&o.parts, "parts", "podman,lists", "what to measure: podman (the idle sandboxes), lists (the rows)")
	flag.IntVar(&o.gatewayPID, "gateway-pid", 0, "the podman gateway's process (podman)")
	flag.StringVar(&o.podmanRoot, "podman-root", "", "the gateway's podman root: its containers.conf and storage.conf (podman)")
	flag.IntVar(&o.sandboxes, "sandboxes", 100, "idle sandboxes (podman)")
	flag.StringVar(&o.class, "class", "standard", "their class (podman)")
	flag.IntVar(&o.clients, "clients", 4, "creates at once")
	flag.DurationVar(&o.settle, "settle", 15*time.Second, "how long the sandboxes idle before they are measured (podman)")
	flag.StringVar(&o.idsFile, "ids", "", "a file each sandbox's id is appended to as it is made, for the script's clean-up (podman)")
	flag.StringVar(&o.berth, "berth", "", "the berth binary of the fake-driver gateways (lists)")
	flag.StringVar(&o.classes, "classes", "examples/sandboxes.yaml", "their sandboxes file (lists)")
	flag.IntVar(&o.rows, "rows", 10000, "sandbox rows of the measured gateway (lists)")
	flag.IntVar(&o.small, "small", 100, "sandbox rows of the baseline gateway (lists)")
	flag.IntVar(&o.requests, "requests", 200, "lists and shows per round (lists)")
	keyFile := flag.String("ssh-key", "", "an ssh public key file for the sandboxes")
	flag.Parse()
	pub, err := os.ReadFile(*keyFile)
	if err != nil {
		fail(fmt.Errorf("-ssh-key: %w", err))
	}
	o.sshKey = strings.TrimSpace(string(pub))
	if o.n < 1 || o.requests < 1 || o.clients < 1 {
		fail(errors.New("-n, -requests and -clients must be positive"))
	}
	ctx := context.Background()
	for part := range strings.SplitSeq(o.parts, ",") {
		switch strings.TrimSpace(part) {
		case "podman":
			err = idle(ctx, o)
		case "lists":
			err = lists(ctx, o)
		default:
			err = fmt.Errorf("-parts: unknown %q", part)
		}
		if err != nil {
			fail(err)
		}
	}
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "bench:", err)
	os.Exit(1)
}

type options struct {
	n, clients        int
	parts, sshKey     string
	gatewayPID        int
	podmanRoot, class string
	sandboxes         int
	settle            time.Duration
	idsFile           string
	berth, classes    string
	rows, small       int
	requests          int
}

// emit hands f to bench/all and says it on standard output.
func emit(f report.Figure) error {
	f.Bench = "density"
	line := fmt.Sprintf("%-46s %14s", f.Name, f.Value)
	if f.Baseline != "" {
		line += fmt.Sprintf("  vs %-24s ×%.2f", f.Baseline, f.Ratio)
	}
	if f.Goal != "" {
		line += "  goal " + f.Goal
	}
	fmt.Printf("%s  (N %d, load %s)\n", line, f.N, f.Load)
	return report.Emit(f)
}

func mib(bytes float64) string { return fmt.Sprintf("%.1f MiB", bytes/(1<<20)) }

func ms(d time.Duration) string { return fmt.Sprintf("%.1f ms", float64(d)/float64(time.Millisecond)) }
