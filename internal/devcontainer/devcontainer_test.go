package devcontainer_test

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"berth.dev/berth/internal/devcontainer"
)

// TestParse reads the files people write: comments and trailing commas,
// a build or an image, and the keys berth maps.
func TestParse(t *testing.T) {
	got, err := devcontainer.Parse([]byte(`{
  // The team's workstation.
  "name": "app", /* built from the repository's Dockerfile */
  "build": { "dockerfile": "Dockerfile", "context": "..", "args": {"GO": "1.26"}, },
  "containerEnv": {
    "APP_MODE": "dev",
    "PATH": "/opt/tool/bin:${containerEnv:PATH}",
    "PRICE": "$5 \"off\"",
  },
  "remoteUser": "dev",
  "postCreateCommand": "make setup // not a comment",
  "forwardPorts": [3000, "localhost:8080", 3000],
  "postStartCommand": "echo started",
  "customizations": {"vscode": {"extensions": ["golang.go"]}},
}`))
	if err != nil {
		t.Fatal(err)
	}
	want := devcontainer.Config{
		Name:       "app",
		Dockerfile: "Dockerfile", Context: "..", BuildArgs: map[string]string{"GO": "1.26"},
		Env: map[string]string{
			"APP_MODE": "dev",
			"PATH":     "/opt/tool/bin:${PATH}",
			"PRICE":    `\$5 \"off\"`,
		},
		User:       "dev",
		PostCreate: &devcontainer.Command{Steps: []devcontainer.Step{{Argv: []string{"/bin/sh", "-c", "make setup // not a comment"}}}},
		Ports:      []int{3000, 8080},
		Ignored:    []string{"postStartCommand: not run (berth runs postCreateCommand only)"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Parse:\n got %#v\nwant %#v", got, want)
	}

	// An image, containerUser when there is no remoteUser, the older
	// dockerFile spelling's context defaulting to the file's directory.
	got, err = devcontainer.Parse([]byte(`{"image": "localhost/team:1", "containerUser": "vscode"}`))
	if err != nil || got.Image != "localhost/team:1" || got.User != "vscode" || got.Dockerfile != "" {
		t.Errorf("image form: %+v, %v", got, err)
	}
	got, err = devcontainer.Parse([]byte(`{"dockerFile": "../Containerfile"}`))
	if err != nil || got.Dockerfile != "../Containerfile" || got.Context != "." {
		t.Errorf("dockerFile form: %+v, %v", got, err)
	}
	got.Resolve("/src/app/.devcontainer")
	if got.Dockerfile != "/src/app/Containerfile" || got.Context != "/src/app/.devcontainer" {
		t.Errorf("Resolve: %+v", got)
	}
}

// TestParseRefuses names the key of each thing berth will not do, all at
// once, rather than building another machine than the one asked.
func TestParseRefuses(t *testing.T) {
	for _, tt := range []struct {
		name, file string
		want       []string
	}{
		{"nothing to build", `{"name": "x"}`, []string{"image: give image or build.dockerfile"}},
		{"both", `{"image": "a", "build": {"dockerfile": "D"}}`, []string{"image: give image or build.dockerfile, not both"}},
		{"compose", `{"dockerComposeFile": "compose.yml", "service": "app"}`, []string{"dockerComposeFile: berth builds one image per sandbox"}},
		{"features", `{"image": "a", "features": {"ghcr.io/devcontainers/features/go:1": {}}}`,
			[]string{"features: berth does not install features (ghcr.io/devcontainers/features/go:1)"}},
		{"other lifecycle", `{"image": "a", "onCreateCommand": "x", "updateContentCommand": ["y"]}`,
			[]string{"onCreateCommand: berth runs postCreateCommand only", "updateContentCommand: berth runs postCreateCommand only"}},
		{"root", `{"image": "a", "remoteUser": "root"}`, []string{"remoteUser: a sandbox never runs as root"}},
		{"user name", `{"image": "a", "remoteUser": "a b"}`, []string{`remoteUser: "a b" is not a user name`}},
		{"ports", `{"image": "a", "forwardPorts": [80, "db:5432", true, 70000]}`, []string{
			"forwardPorts[0]: 80 is not reachable: sandboxes' ports are 1024–65535",
			`forwardPorts[1]: "db:5432" is another host's port`,
			"forwardPorts[2]: true is not a port",
			"forwardPorts[3]: 70000 is not reachable",
		}},
		{"env", `{"image": "a", "containerEnv": {"1X": "a", "HOME_DIR": "${localEnv:HOME}", "W": "${localWorkspaceFolder}"}}`, []string{
			`containerEnv: "1X" is not a variable name`,
			"containerEnv.HOME_DIR: ${localEnv:HOME}: berth expands only ${containerEnv:NAME}",
			"containerEnv.W: ${localWorkspaceFolder}: berth expands only",
		}},
		{"command", `{"image": "a", "postCreateCommand": ""}`, []string{"postCreateCommand: the command is empty"}},
		{"command shape", `{"image": "a", "postCreateCommand": 7}`, []string{"postCreateCommand: it is a number; give a string, an array of strings, or an object of them"}},
		{"named command", `{"image": "a", "postCreateCommand": {"deps": []}}`, []string{"postCreateCommand: deps: the command is empty"}},
		{"not JSON", "{\n  \"image\": \"a\",,\n}", []string{"devcontainer.json: line 3, column 1: invalid character '}'"}},
		{"open comment", `{"image": "a"} /*`, []string{"devcontainer.json: a /* comment at byte 15 is not closed"}},
		{"too big", `{"image": "` + strings.Repeat("a", devcontainer.MaxFile) + `"}`, []string{"the limit is 1048576"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := devcontainer.Parse([]byte(tt.file))
			if err == nil {
				t.Fatalf("Parse accepted %s", tt.file)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q\nlacks %q", err, w)
				}
			}
		})
	}
}

// TestCommandForms reads the three forms and writes back the form the
// image keeps, which reads back the same.
func TestCommandForms(t *testing.T) {
	for _, tt := range []struct {
		in   string
		want []devcontainer.Step
	}{
		{`"npm ci && make"`, []devcontainer.Step{{Argv: []string{"/bin/sh", "-c", "npm ci && make"}}}},
		{`["make", "two words", "$HOME"]`, []devcontainer.Step{{Argv: []string{"make", "two words", "$HOME"}}}},
		{`{"web": "npm ci", "api": ["go", "mod", "download"]}`, []devcontainer.Step{
			{Name: "api", Argv: []string{"go", "mod", "download"}},
			{Name: "web", Argv: []string{"/bin/sh", "-c", "npm ci"}},
		}},
	} {
		c, err := devcontainer.ParseCommand(json.RawMessage(tt.in))
		if err != nil {
			t.Fatalf("%s: %v", tt.in, err)
		}
		if !reflect.DeepEqual(c.Steps, tt.want) {
			t.Errorf("%s: %#v, want %#v", tt.in, c.Steps, tt.want)
		}
		out, err := json.Marshal(c)
		if err != nil {
			t.Fatal(err)
		}
		back, err := devcontainer.ParseCommand(out)
		if err != nil || !reflect.DeepEqual(back.Steps, c.Steps) {
			t.Errorf("%s: written %s, read back %#v, %v", tt.in, out, back.Steps, err)
		}
	}
}

// TestStandardize keeps strings as they are and offsets on their lines.
func TestStandardize(t *testing.T) {
	in := "{\"a\": \"// no /* comment */\", // yes\n\"b\": [1, 2,],\n}"
	out, err := devcontainer.Standardize([]byte(in))
	if err != nil {
		t.Fatal(err)
	}
	if len(out) != len(in) || strings.Count(string(out), "\n") != 2 {
		t.Errorf("lengths or lines moved: %q", out)
	}
	var v map[string]any
	if err := json.Unmarshal(out, &v); err != nil || v["a"] != "// no /* comment */" {
		t.Errorf("%q: %v, %v", out, v, err)
	}
}
