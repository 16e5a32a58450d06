package gateway_test

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"berth.dev/berth/internal/forge"
)

// BenchmarkClone measures a full clone of a repository of 3000 files through
// the gateway's git endpoint (a sandbox's key, the access checks and
// git http-backend in the path) against a clone straight from its bare
// repository on the same host (git clone --no-local: objects are packed as a
// server would, not hard-linked). It alternates the two and reports the
// medians and their ratio:
//
//	go test ./internal/gateway/ -run XXX -bench Clone -benchtime 10x
func BenchmarkClone(b *testing.B) {
	w := newWorld(b)
	src := b.TempDir()
	run(b, src, "git", "init", "-q", "-b", "main")
	for i := range 3000 {
		dir := filepath.Join(src, fmt.Sprintf("pkg%02d", i%50))
		os.MkdirAll(dir, 0o755)
		body := strings.Repeat(fmt.Sprintf("line %d of file %d\n", i, i), 40)
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("f%04d.txt", i)), []byte(body), 0o644); err != nil {
			b.Fatal(err)
		}
	}
	run(b, src, "git", "add", ".")
	run(b, src, "git", "commit", "-q", "-m", "3000 files")
	if _, err := w.forge.Import(b.Context(), "acme/big", src); err != nil {
		b.Fatal(err)
	}
	bare, _ := w.forge.Path(forge.Repo{Path: "acme/big"})
	w.allowRepos(b, "acme")
	_, env := w.agent(b, w.owner, "bench", "acme/big")
	through := withAuth(b, env["BERTH_REPO"], "berth", env["BERTH_API_KEY"])

	var gw, direct []time.Duration
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		dir := b.TempDir()
		start := time.Now()
		run(b, dir, "git", "clone", "-q", "--no-local", bare, "direct")
		direct = append(direct, time.Since(start))
		start = time.Now()
		run(b, dir, "git", "clone", "-q", through, "gateway")
		gw = append(gw, time.Since(start))
	}
	b.StopTimer()
	g, d := median(gw), median(direct)
	b.ReportMetric(float64(g.Milliseconds()), "gateway-ms")
	b.ReportMetric(float64(d.Milliseconds()), "direct-ms")
	b.ReportMetric(float64(g)/float64(d), "ratio")
	b.Logf("clone of 3000 files, median of %d: through the gateway %v, straight from the bare repository %v, ratio %.2f",
		len(gw), g.Round(time.Millisecond), d.Round(time.Millisecond), float64(g)/float64(d))
}

func median(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}
