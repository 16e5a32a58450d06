package panel_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"berth.dev/berth/internal/sandbox"
)

// TestBrowserRunTranscript (issue 19): an agent sandbox's page shows its
// task, and its run as a transcript, live: opened while the agent is
// held, it shows the run going; once the agent prints its stream the page
// (refreshing itself, not reloaded) shows the tool call with its command,
// the result, the totals, and the change the run pushed.
func TestBrowserRunTranscript(t *testing.T) {
	c := newChrome(t)
	w := newWorld(t)
	b, err := os.ReadFile(filepath.Join("..", "..", "runner", "testdata", "streams", "claude-tool.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	started, held := make(chan struct{}), make(chan struct{})
	w.drv.SetAgent(func(spec sandbox.Spec) ([]string, int) {
		close(started)
		<-held
		if err := os.WriteFile(filepath.Join(spec.Run.Work, "f.txt"), []byte("hi\n"), 0o644); err != nil {
			t.Error(err)
		}
		git(t, spec.Run.Work, "add", "-A")
		git(t, spec.Run.Work, "commit", "-q", "-m", "add f.txt")
		return lines, 0
	})
	released := false
	release := func() {
		if !released {
			released = true
			close(held)
		}
	}
	t.Cleanup(release)
	sb, err := w.sandboxes.Create(t.Context(), w.principal("alice"), sandbox.CreateRequest{Name: "fix", Purpose: "agent", Class: "standard",
		Repo: "acme/app", Branch: "main", Task: "Create f.txt containing hi and commit it", Runner: "claude-code"})
	if err != nil {
		t.Fatal(err)
	}
	<-started

	ctx := c.tab()
	c.signIn(ctx, w.url, w.keys["alice"])
	c.run(ctx, "the running agent's page", chromedp.Navigate(w.url+"/sandboxes/"+string(sb.ID)), chromedp.WaitVisible(chromedp.CSS("#run-h")))
	if got := c.text(ctx, "pre.task"); got != "Create f.txt containing hi and commit it" {
		t.Errorf("the task shown: %q", got)
	}
	release()
	c.run(ctx, "the transcript, live", chromedp.WaitVisible(chromedp.CSS(".t-totals")))
	if got := c.text(ctx, ".t-call"); got != "Bash echo hi > f.txt && git add f.txt && git commit -q -m 'add f.txt' && git log --oneline | head -1" {
		t.Errorf("the tool call: %q", got)
	}
	if got := c.text(ctx, ".t-result"); got != "c521422 add f.txt" {
		t.Errorf("the tool's result: %q", got)
	}
	if got := c.text(ctx, ".t-totals"); got != "Totals: 240 in, 34 out, 60 cache read, 10 cache write · 2 turns · $0.0013 · claude-sonnet-4-5" {
		t.Errorf("the totals: %q", got)
	}
	// The change shows once the run's end is recorded (a refresh later).
	c.run(ctx, "the run's change", chromedp.WaitVisible(chromedp.CSS("pre.diff")))
	if got := c.text(ctx, "pre.diff"); !strings.Contains(got, "f.txt | 1 +") || !strings.Contains(got, "+hi") {
		t.Errorf("the change: %q", got)
	}
	c.shot(ctx, "sandbox-agent-transcript")
}
