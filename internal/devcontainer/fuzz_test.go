package devcontainer_test

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"berth.dev/berth/internal/devcontainer"
)

// FuzzParse: a devcontainer.json is a repository's, not berth's. Whatever
// it holds, Parse answers without panicking; what it accepts stays within
// the bounds, and its postCreateCommand survives the trip into the image.
func FuzzParse(f *testing.F) {
	for _, s := range []string{
		`{"image": "a"}`,
		`{"build": {"dockerfile": "D",}, // x` + "\n" + `"postCreateCommand": {"a": ["b"]}}`,
		`{"image": "a", "containerEnv": {"P": "${containerEnv:PATH}:$x\"\\"}, "forwardPorts": ["localhost:3000", 8080]}`,
		`/* */ {"image": "a", "remoteUser": "vscode"}`,
		`{"image": "a"} /*`,
		`"just a string"`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := devcontainer.Parse(data)
		if err != nil {
			return
		}
		if (c.Image == "") == (c.Dockerfile == "") {
			t.Fatalf("accepted with image %q and dockerfile %q", c.Image, c.Dockerfile)
		}
		if len(c.Env) > devcontainer.MaxEnv || len(c.Ports) > devcontainer.MaxPorts {
			t.Fatalf("past the bounds: %d variables, %d ports", len(c.Env), len(c.Ports))
		}
		for _, p := range c.Ports {
			if p < devcontainer.MinPort || p > devcontainer.MaxPort {
				t.Fatalf("port %d accepted", p)
			}
		}
		for k, v := range c.Env {
			if strings.ContainsAny(v, "\r\n\x00") {
				t.Fatalf("containerEnv.%s = %q holds a line break", k, v)
			}
		}
		if c.PostCreate != nil {
			out, err := json.Marshal(c.PostCreate)
			if err != nil {
				t.Fatal(err)
			}
			back, err := devcontainer.ParseCommand(out)
			if err != nil || !reflect.DeepEqual(back.Steps, c.PostCreate.Steps) {
				t.Fatalf("postCreateCommand %s read back as %#v, %v", out, back.Steps, err)
			}
		}
	})
}

// FuzzStandardize: what Standardize makes of plain JSON is the same JSON.
func FuzzStandardize(f *testing.F) {
	for _, s := range []string{`{"a": "//"}`, `[1, "/*", {"b": null}]`, `"\"//\""`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		out, err := devcontainer.Standardize(data)
		if err != nil {
			return
		}
		if len(out) != len(data) {
			t.Fatalf("length %d became %d", len(data), len(out))
		}
		var a, b any
		if json.Unmarshal(data, &a) == nil {
			if err := json.Unmarshal(out, &b); err != nil || !reflect.DeepEqual(a, b) {
				t.Fatalf("plain JSON %q became %q (%v)", data, out, err)
			}
		}
	})
}
