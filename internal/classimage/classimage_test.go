package classimage_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"berth.dev/berth/internal/classimage"
	"berth.dev/berth/internal/devcontainer"
)

// TestFind reads what a path names: a directory's devcontainer.json comes
// before its Containerfile, a Containerfile builds in its directory, and
// a directory with neither says what it looked for.
func TestFind(t *testing.T) {
	dir := t.TempDir()
	mk := func(rel, text string) string {
		p := filepath.Join(dir, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	cf := mk("Containerfile", "FROM x\n")
	src, err := classimage.Find(dir)
	if err != nil || src.Devcontainer != nil || src.Containerfile != cf || src.Context != dir {
		t.Fatalf("Find(dir with a Containerfile) = %+v, %v", src, err)
	}
	mk(".devcontainer/devcontainer.json", `{"build": {"dockerfile": "../Containerfile", "context": ".."}}`)
	src, err = classimage.Find(dir)
	if err != nil || src.Devcontainer == nil {
		t.Fatalf("Find(dir with both) = %+v, %v; want the devcontainer.json", src, err)
	}
	if src.Devcontainer.Dockerfile != cf || src.Devcontainer.Context != dir {
		t.Errorf("the build's paths are not against the file's directory: %+v", src.Devcontainer)
	}
	if _, err := classimage.Find(t.TempDir()); err == nil || !strings.Contains(err.Error(), ".devcontainer/devcontainer.json, .devcontainer.json, Containerfile, Dockerfile") {
		t.Errorf("Find(empty dir) = %v", err)
	}
	bad := mk("bad/devcontainer.json", `{"features": {"go": {}}}`)
	if _, err := classimage.Find(bad); err == nil || !strings.Contains(err.Error(), "features: berth does not install features") {
		t.Errorf("Find(a devcontainer with features) = %v", err)
	}
}

// TestLayer writes what a sandbox needs of its image, and what the
// devcontainer asks, into a Containerfile that needs no context.
func TestLayer(t *testing.T) {
	c, err := devcontainer.Parse([]byte(`{"image": "localhost/team:1", "remoteUser": "vscode",
		"containerEnv": {"PATH": "/opt/go/bin:${containerEnv:PATH}", "Q": "a \"b\" $c"},
		"postCreateCommand": "make deps >log", "forwardPorts": [3000]}`))
	if err != nil {
		t.Fatal(err)
	}
	src := classimage.Source{Path: ".devcontainer/devcontainer.json", Devcontainer: &c}
	text, err := classimage.Plan(src, c.Image, classimage.Options{Berth: "localhost/berth-sandbox:latest", UID: 1001}).Containerfile()
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"FROM localhost/berth-sandbox:latest AS berth\nFROM localhost/team:1\nUSER 0:0\n",
		"COPY --from=berth /usr/local/bin/berth-init /usr/local/bin/berth-init\n",
		" && sh /tmp/berth-layer.sh 1001 'vscode' \\\n",
		`RUN mkdir -p /etc/berth && printf '%s\n' '["/bin/sh","-c","make deps >log"]' >/etc/berth/post-create.json`,
		"    PATH=\"/opt/go/bin:${PATH}\" \\\n    Q=\"a \\\"b\\\" \\$c\"\n",
		`LABEL berth.purpose="engineer" berth.uid="1001" berth.forward-ports="3000" berth.source=".devcontainer/devcontainer.json"`,
		"USER 1001:1001\nWORKDIR /home/berth\nENTRYPOINT [\"/usr/local/bin/berth-init\"]\nCMD []\n",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("the layer lacks %q:\n%s", want, text)
		}
	}
	if strings.Contains(text, "COPY bin") || strings.Contains(text, "ADD ") {
		t.Errorf("the layer needs a build context:\n%s", text)
	}

	// For a cluster's own build: FROM the build's BASE argument.
	text, err = classimage.Plan(classimage.Source{Path: "Containerfile"}, "", classimage.Options{Berth: "registry.example/berth-sandbox:1", UID: 1001}).Containerfile()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(text, "FROM registry.example/berth-sandbox:1 AS berth\nARG BASE\nFROM ${BASE}\n") || strings.Contains(text, "post-create") {
		t.Errorf("the printed layer:\n%s", text)
	}
	if _, err := (classimage.Layer{Berth: "b", UID: 0}).Containerfile(); err == nil {
		t.Error("a layer for uid 0 was written")
	}
}
