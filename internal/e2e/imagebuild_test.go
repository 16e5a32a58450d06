package e2e_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"berth.dev/berth/internal/api"
)

// TestDevcontainerClass is issue 18's own images on podman: a
// repository's .devcontainer/devcontainer.json whose build.dockerfile is
// FROM berth's sandbox image with a user of its own (dev, uid 1500, owning
// a tool under /opt) builds with berth image build into a class image;
// the class it prints, applied, starts a sandbox where dev is the
// sandbox's user (uid 1001, what it owned is 1001's), containerEnv is in
// the ssh session, forwardPorts are in berth sandbox show, and the
// postCreateCommand ran once: not again after a suspend and resume.
func TestDevcontainerClass(t *testing.T) {
	root := podmanRoot(t)
	base := os.Getenv("BERTH_TEST_SANDBOX_IMAGE")
	if base == "" {
		base = "localhost/berth-sandbox:latest"
	}
	// berth's layer copies berth-init from berth's sandbox image: this
	// tree's, which runs the postCreateCommand.
	berthImage := withThisBerthInit(t, root, base)

	repo := t.TempDir()
	devc := filepath.Join(repo, ".devcontainer")
	if err := os.Mkdir(devc, 0o755); err != nil {
		t.Fatal(err)
	}
	write := func(name, text string) {
		if err := os.WriteFile(filepath.Join(devc, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("Dockerfile", `FROM `+base+`
USER 0:0
RUN userdel -r berth \
 && useradd --create-home --uid 1500 --shell /bin/bash dev \
 && mkdir -p /opt/tool/bin \
 && printf '#!/bin/sh\necho devtool here\n' >/opt/tool/bin/devtool \
 && chmod 0755 /opt/tool/bin/devtool && chown -R dev:dev /opt/tool
USER dev
`)
	write("devcontainer.json", `{
  // The team's workstation, as an editor would write it.
  "name": "App Dev",
  "build": { "dockerfile": "Dockerfile" },
  "containerEnv": { "APP_MODE": "dev", "PATH": "/opt/tool/bin:${containerEnv:PATH}" },
  "remoteUser": "dev",
  "postCreateCommand": "echo ran >> ~/post-create-count && id -un > ~/post-create-user",
  "forwardPorts": [3000, "localhost:8080"],
  "customizations": { "vscode": { "extensions": ["golang.go"] } },
}
`)

	b := make([]byte, 4)
	_, _ = rand.Read(b)
	tag := "localhost/berth-e2e-devc:" + hex.EncodeToString(b)
	// Registered before the gateway's cleanup, so it runs after it: once
	// the sandbox is gone.
	t.Cleanup(func() {
		if out, err := podmanOn(root, "rmi", tag).CombinedOutput(); err != nil {
			t.Logf("podman rmi %s: %v: %s", tag, err, out)
		}
	})
	g := startGateway(t)
	started := time.Now()
	class := string(g.berth("image", "build", tag, repo, "--berth-image", berthImage))
	t.Logf("berth image build: %s", time.Since(started).Round(time.Millisecond))
	for _, want := range []string{"  - name: app-dev\n", `    image: "` + tag + `"`, "    purposes: [engineer]\n", "    ports: [3000, 8080]\n"} {
		if !strings.Contains(class, want) {
			t.Fatalf("the class berth image build printed lacks %q:\n%s", want, class)
		}
	}
	// berth image check passes it as an engineer image: its label says so.
	check := string(g.berth("image", "check", tag))
	for _, el := range []string{"entrypoint", "sshd", "login", "non-root", "home", "local-bin", "tools", "post-create"} {
		if !regexp.MustCompile(`(?m)^` + el + ` +✓`).MatchString(check) {
			t.Errorf("berth image check: %s does not hold:\n%s", el, check)
		}
	}
	// Applied as printed, with the tier this machine has.
	if _, err := g.operator.ApplyClasses(context.Background(), "", strings.NewReader(class+"    isolation: standard\n")); err != nil {
		t.Fatalf("apply the printed class: %v\n%s", err, class)
	}

	alice := g.newMember(t, "alice")
	pub, err := os.ReadFile(alice.key + ".pub")
	if err != nil {
		t.Fatal(err)
	}
	sb, err := alice.api.CreateSandbox(context.Background(), api.CreateSandbox{Name: "dev", Class: "app-dev", SSHKeys: []string{strings.TrimSpace(string(pub))}})
	if err != nil {
		t.Fatal(err)
	}
	g.waitState(alice.api, sb.ID, "running", 2*time.Minute)
	sh := func(script string) string {
		t.Helper()
		return strings.TrimSpace(alice.run(berthBin, "sandbox", "ssh", "dev", "-i", alice.key, "--", script))
	}
	// It runs beside sshd: the session may come before it is done.
	eventually(t, time.Minute, "the postCreateCommand to finish", func() bool {
		return sh("cat ~/.berth/post-create.done 2>/dev/null || true") != ""
	})
	if got := sh("cat ~/.berth/post-create.done"); !strings.HasPrefix(got, "exit 0 at ") {
		t.Errorf("post-create.done: %q, want exit 0", got)
	}
	got := lines(sh("id -un; id -u; echo $APP_MODE; devtool; stat -c %u /opt/tool/bin/devtool; cat ~/post-create-count; cat ~/post-create-user; readlink /home/dev"))
	want := []string{"berth", "1001", "dev", "devtool here", "1001", "ran", "berth", "/home/berth"}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("in the sandbox: %q\nwant %q (user, uid, containerEnv, PATH, what dev owned, one postCreateCommand run as the user, dev's old HOME)", got, want)
	}
	show := alice.run(berthBin, "sandbox", "show", "dev")
	if !strings.Contains(show, "ports:") || !strings.Contains(show, "3000, 8080 (berth sandbox forward dev 3000 8080)") {
		t.Errorf("berth sandbox show lacks the forwardPorts:\n%s", show)
	}

	// Suspended and resumed, the HOME volume remembers the run.
	if _, err := alice.api.Suspend(context.Background(), sb.ID); err != nil {
		t.Fatal(err)
	}
	g.waitState(alice.api, sb.ID, "suspended", time.Minute)
	if _, err := alice.api.Resume(context.Background(), sb.ID); err != nil {
		t.Fatal(err)
	}
	g.waitState(alice.api, sb.ID, "running", 2*time.Minute)
	if got := sh("cat ~/post-create-count"); got != "ran" {
		t.Errorf("after a resume post-create-count is %q: the postCreateCommand ran again", got)
	}
}
