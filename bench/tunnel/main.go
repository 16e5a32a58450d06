// Command tunnel measures ssh through the gateway's tunnel against ssh
// straight to the same sandbox's sshd, in the same run, alternating the
// two so drift in the machine's load touches both alike, and prints
// medians and ratios. bench/tunnel.sh sets up the gateway, the sandbox and
// the ssh config.
//
// What is timed:
//   - bulk copy: `ssh HOST 'head -c SIZE /dev/zero'` to /dev/null, from the
//     first byte to the last, so the handshake is left out: the rate at
//     which the tunnel carries bytes (through it: ssh → berth sandbox
//     proxy → gateway → sshd; directly: ssh → sshd).
//   - round trip: the whole of `ssh HOST true` (connect, key exchange,
//     authentication, one command), the latency a person feels.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"time"

	"berth.dev/berth/bench/internal/report"
	"berth.dev/berth/bench/internal/stats"
)

func main() {
	n := flag.Int("n", 10, "runs of each kind")
	size := flag.Int("size", 512, "MiB per bulk copy")
	config := flag.String("ssh-config", "", "the ssh config holding HOST (berth sandbox config wrote it)")
	host := flag.String("host", "berth-bench", "the sandbox's ssh host")
	key := flag.String("key", "", "the ssh private key the sandbox accepts")
	direct := flag.String("direct", "", "the sandbox's own address, for the direct ssh")
	flag.Parse()
	if *config == "" || *key == "" || *direct == "" {
		fmt.Fprintln(os.Stderr, "bench: -ssh-config, -key and -direct are required")
		os.Exit(2)
	}
	through := []string{"-F", *config, "-i", *key, "-o", "BatchMode=yes", *host}
	straight := []string{"-F", "/dev/null", "-i", *key, "-o", "BatchMode=yes", "-o", "StrictHostKeyChecking=no",
		"-o", "UserKnownHostsFile=/dev/null", "-o", "LogLevel=ERROR", "-p", "2222", "berth@" + *direct}
	if err := run(*n, int64(*size)<<20, through, straight); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

func run(n int, size int64, through, straight []string) error {
	type path struct {
		args  []string
		rates []float64
		rtts  []time.Duration
	}
	tun, dir := &path{args: through}, &path{args: straight}
	var loads report.Loads
	for i := range n {
		loads.Sample()
		order := []*path{tun, dir}
		if i%2 == 1 {
			order = []*path{dir, tun}
		}
		for _, p := range order {
			rate, err := bulk(p.args, size)
			if err != nil {
				return err
			}
			rtt, err := roundTrip(p.args)
			if err != nil {
				return err
			}
			p.rates, p.rtts = append(p.rates, rate), append(p.rtts, rtt)
		}
		fmt.Fprintf(os.Stderr, "run %d/%d: bulk %.0f vs %.0f MB/s, ssh true %v vs %v\n", i+1, n,
			tun.rates[i], dir.rates[i], tun.rtts[i].Round(time.Millisecond), dir.rtts[i].Round(time.Millisecond))
	}
	mt, md := stats.Median(tun.rates), stats.Median(dir.rates)
	lt, ld := stats.Median(tun.rtts), stats.Median(dir.rtts)
	fmt.Printf("ssh through the gateway's tunnel vs straight to sshd, median of %d (podman, runc, one host)\n", n)
	fmt.Printf("%-26s %14s %14s %8s\n", "", "tunnel", "direct", "ratio")
	fmt.Printf("%-26s %9.0f MB/s %9.0f MB/s %8.2f\n", fmt.Sprintf("bulk copy (%d MiB)", size>>20), mt, md, mt/md)
	fmt.Printf("%-26s %14v %14v %8.2f   (+%v)\n", "ssh host true", lt.Round(time.Millisecond), ld.Round(time.Millisecond),
		float64(lt)/float64(ld), (lt - ld).Round(time.Millisecond))
	loads.Sample()
	return errors.Join(
		report.Emit(report.Figure{Bench: "tunnel", Name: fmt.Sprintf("bulk copy through the tunnel (%d MiB)", size>>20),
			Value: fmt.Sprintf("%.0f MB/s", mt), Baseline: fmt.Sprintf("%.0f MB/s (ssh straight to sshd)", md),
			Ratio: mt / md, Goal: "≥ 0.95", N: n, Load: loads.String()}),
		report.Emit(report.Figure{Bench: "tunnel", Name: "ssh host true through the tunnel",
			Value: lt.Round(time.Millisecond).String(), Baseline: ld.Round(time.Millisecond).String() + " (straight to sshd)",
			Ratio: float64(lt) / float64(ld), Goal: "≤ 1.05", N: n, Load: loads.String()}))
}

// bulk copies size bytes from the sandbox over ssh and returns the rate
// from the first byte to the last, in MB/s.
func bulk(args []string, size int64) (float64, error) {
	cmd := exec.Command("ssh", append(args, fmt.Sprintf("head -c %d /dev/zero", size))...)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		return 0, err
	}
	if err := cmd.Start(); err != nil {
		return 0, err
	}
	buf := make([]byte, 256<<10)
	first, err := io.ReadAtLeast(out, buf, 1)
	if err != nil {
		_ = cmd.Wait()
		return 0, fmt.Errorf("bulk copy: %w", err)
	}
	start := time.Now()
	rest, err := io.CopyBuffer(io.Discard, out, buf)
	took := time.Since(start)
	if err := errors.Join(err, cmd.Wait()); err != nil {
		return 0, fmt.Errorf("bulk copy: %w", err)
	}
	if got := int64(first) + rest; got != size {
		return 0, fmt.Errorf("bulk copy: %d bytes, want %d", got, size)
	}
	return float64(rest) / took.Seconds() / 1e6, nil
}

// roundTrip times one `ssh HOST true`.
func roundTrip(args []string) (time.Duration, error) {
	start := time.Now()
	cmd := exec.Command("ssh", append(args, "true")...)
	cmd.Stderr = os.Stderr
	if err := cmd.Run(); err != nil {
		return 0, fmt.Errorf("ssh true: %w", err)
	}
	return time.Since(start), nil
}
