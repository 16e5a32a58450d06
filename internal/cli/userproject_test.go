package cli_test

import (
	"testing"
)

// TestAdministratorSetsAMembersProject: a member's sandbox lands in the
// organisation's oldest project and the member cannot choose another;
// once an administrator sets the member's project, their new sandboxes
// land there (berth user show says so), and still they choose no other.
func TestAdministratorSetsAMembersProject(t *testing.T) {
	g := newEngineerGateway(t)
	run := func(who string, want int, args ...string) (string, string) {
		t.Helper()
		code, out, errs := g.berth(t, who, args...)
		if code != want {
			t.Fatalf("%s: berth %v exited %d, want %d\nstdout: %s\nstderr: %s", who, args, code, want, out, errs)
		}
		return out, errs
	}
	projectOf := func(name string) string {
		t.Helper()
		sb, err := g.client("alice").Sandbox(t.Context(), name)
		if err != nil {
			t.Fatal(err)
		}
		prjs, err := g.client("ann").Projects(t.Context(), sb.Organisation)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range prjs {
			if p.ID == sb.Project {
				return p.Name
			}
		}
		t.Fatalf("%s is in project %s, which acme has not", name, sb.Project)
		return ""
	}
	run("ann", 0, "project", "create", "ml")
	run("alice", 0, "sandbox", "create", "before", "--ssh-key", g.keyFile)
	if p := projectOf("before"); p != "default" {
		t.Errorf("a member's sandbox is in %s, want default (the oldest)", p)
	}
	out, _ := run("ann", 0, "user", "show", "alice")
	wantLines(t, "user show", out, `^project: +default \(prj_\w+; the organisation's oldest\)$`)

	// A member chooses no project, neither by flag nor for themselves.
	_, errs := run("alice", 1, "sandbox", "create", "x", "--ssh-key", g.keyFile, "--project", "ml")
	wantLines(t, "create --project", errs, `^berth: forbidden: .*only an administrator may choose a project; a member's sandbox goes in default$`)
	_, errs = run("alice", 1, "user", "set-project", "alice", "ml")
	wantLines(t, "member set-project", errs, `^berth: forbidden: .*only an administrator of acme may`)

	// An administrator sets it: it is checked, shown, and followed.
	_, errs = run("ann", 1, "user", "set-project", "alice", "nope")
	wantLines(t, "set-project nope", errs, `^berth: invalid: project: no project "nope" in acme \(berth project list\)$`)
	exits := func(code int, args ...string) { run("ann", code, args...) }
	exits(2, "user", "set-project", "alice")
	out, _ = run("ann", 0, "user", "set-project", "alice", "ml")
	wantLines(t, "set-project", out, `^alice's new sandboxes and keys land in project ml$`)
	out, _ = run("ann", 0, "user", "show", "alice")
	wantLines(t, "user show", out, `^project: +ml \(prj_\w+; set by an administrator\)$`)

	run("alice", 0, "sandbox", "create", "after", "--ssh-key", g.keyFile)
	if p := projectOf("after"); p != "ml" {
		t.Errorf("after set-project, a member's sandbox is in %s, want ml", p)
	}
	if p := projectOf("before"); p != "default" {
		t.Errorf("set-project moved an older sandbox to %s", p)
	}
	_, errs = run("alice", 1, "sandbox", "create", "y", "--ssh-key", g.keyFile, "--project", "default")
	wantLines(t, "create --project default", errs, `only an administrator may choose a project; a member's sandbox goes in ml$`)
}
