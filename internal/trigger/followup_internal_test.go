package trigger

import (
	"strings"
	"testing"

	"berth.dev/berth/internal/trigger/event"
)

// TestFollowUpTask: a review's text is the session's next task, a plain
// comment's only after /berth; what gives no task gives none.
func TestFollowUpTask(t *testing.T) {
	const url = "https://github.test/acme/app/pull/7"
	for _, c := range []struct {
		name    string
		e       event.Event
		ok      bool
		holds   string
		without string
	}{
		{"review", event.Event{Review: true, Comment: "Add a test for the empty case.", Author: "ada", URL: url}, true, "Add a test for the empty case.", ""},
		{"review with the command", event.Event{Review: true, Comment: "/berth rename it", Author: "ada", URL: url}, true, "rename it", "/berth"},
		{"comment with the command", event.Event{Comment: "/berth use a map\nand say why", Author: "ada", URL: url}, true, "use a map\nand say why", "/berth"},
		{"plain comment", event.Event{Comment: "Looks good to me", Author: "ada", URL: url}, false, "", ""},
		{"a word that starts like the command", event.Event{Comment: "/berthing is fine", URL: url}, false, "", ""},
		{"the command alone", event.Event{Comment: "/berth", URL: url}, false, "", ""},
		{"an empty review", event.Event{Review: true, Comment: "  ", URL: url}, false, "", ""},
	} {
		task, ok := followUpTask(c.e, 1<<10)
		if ok != c.ok || !strings.Contains(task, c.holds) || (c.without != "" && strings.Contains(task, c.without)) {
			t.Errorf("%s: %q, %v; want %v holding %q", c.name, task, ok, c.ok, c.holds)
		}
		if ok && (!strings.Contains(task, url) || !strings.Contains(task, "@ada")) && c.e.Author != "" {
			t.Errorf("%s: %q names neither the pull request nor the reviewer", c.name, task)
		}
	}
	long := event.Event{Review: true, Comment: strings.Repeat("é", 2000), URL: url}
	if task, _ := followUpTask(long, 1000); len(task) > 1000 || !strings.HasSuffix(task, "é") {
		t.Errorf("a long review's task is %d bytes, or cut inside a character", len(task))
	}
}
