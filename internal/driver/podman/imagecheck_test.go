package podman

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"berth.dev/berth/internal/api"
	"berth.dev/berth/internal/sandbox"
)

func TestCheckRunArgs(t *testing.T) {
	got := checkRunArgs(checkRun{
		image: "localhost/berth-agent-pi:latest", name: "berth-image-check-x", uid: 1001,
		work: "/tmp/w", env: []string{"BERTH_RUNNER=pi", "BERTH_IMAGE_CHECK=1"}, args: []string{"-p", "two words", ""},
	})
	want := []string{"run", "--rm", "--name", "berth-image-check-x", "--user", "1001:1001", "--read-only",
		"--tmpfs", "/tmp:rw,noexec,nosuid,size=512m", "--tmpfs", "/home/berth:rw,exec,mode=0700,U,size=1g",
		"--cap-drop", "ALL", "--security-opt", "no-new-privileges",
		"--pids-limit", "256", "--memory", "1g", "--cpus", "1", "--network", "none",
		"-v", "/tmp/w:/work", "-w", "/work",
		"-e", "BERTH_RUNNER=pi", "-e", "BERTH_IMAGE_CHECK=1",
		"localhost/berth-agent-pi:latest", "-p", "two words", ""}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("podman argv (-want +got):\n%s", diff)
	}
}

func TestNewCheckSetup(t *testing.T) {
	s, err := newCheckSetup("pi", os.Getuid())
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(s.dir)
	if want := append([]string{"-p", "--mode", "json", "--provider", "berth", "--model", "berth-image-check"}, checkProbeArgs...); !slices.Equal(s.args, want) {
		t.Errorf("args = %q, want the runner's ContainerArgs and the probes %q", s.args, want)
	}
	if b, err := os.ReadFile(filepath.Join(s.dir, ".berth-prompt.txt")); err != nil || len(b) == 0 {
		t.Errorf("prompt file: %q, %v", b, err)
	}
	var files []struct{ Path, Content string }
	for _, kv := range s.env {
		if v, ok := strings.CutPrefix(kv, "BERTH_RUNNER_FILES="); ok {
			if err := json.Unmarshal([]byte(v), &files); err != nil {
				t.Fatal(err)
			}
		}
	}
	if len(files) != 2 || files[0].Path != ".pi/agent/models.json" {
		t.Errorf("BERTH_RUNNER_FILES = %+v, want pi's models.json and settings.json", files)
	}

	s, err = newCheckSetup("", os.Getuid())
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(s.dir)
	if !slices.Equal(s.args, checkProbeArgs) || slices.ContainsFunc(s.env, func(kv string) bool { return strings.HasPrefix(kv, "BERTH_RUNNER") }) {
		t.Errorf("no runner: args %q, env %q; want the probes and no BERTH_RUNNER*", s.args, s.env)
	}
}

// report is a check report berth-init could print for setup s, every
// element holding.
func report(t *testing.T, s checkSetup, edit func(*api.CheckReport)) podmanResult {
	t.Helper()
	rep := api.CheckReport{
		Runner: s.runner,
		Argv:   append([]string{"pi"}, s.args...),
		Stdin:  api.CheckStdin{Bytes: 10, SHA256: s.promptSHA256},
	}
	for _, n := range []string{"non-root", "capabilities", "no-new-privileges", "workdir", "workdir-writable",
		"prompt-stdin", "home", "runner-files", "git", "runner"} {
		rep.Elements = append(rep.Elements, api.CheckElement{Name: n, OK: true, Detail: n + " holds"})
	}
	if edit != nil {
		edit(&rep)
	}
	b, err := json.Marshal(rep)
	if err != nil {
		t.Fatal(err)
	}
	return podmanResult{stdout: append(b, '\n')}
}

func TestJudgeCheck(t *testing.T) {
	s := checkSetup{runner: "pi", promptSHA256: "abc", args: []string{"-p", "two words", ""}}
	missing := podmanResult{code: 64, stderr: []byte("berth-init: prompt file /work/.berth-prompt.txt does not exist (…)\n")}
	all := []string{"launch", "non-root", "capabilities", "no-new-privileges", "workdir", "workdir-writable",
		"prompt-stdin", "args", "home", "runner-files", "git", "runner", "missing-prompt"}
	tests := []struct {
		name          string
		setup         checkSetup
		first, second podmanResult
		names         []string // the elements, in order
		failed        []string
	}{
		{name: "holds", setup: s, first: report(t, s, nil), second: missing, names: all},
		{
			name: "another prompt on stdin", setup: s, second: missing, names: all,
			first:  report(t, s, func(r *api.CheckReport) { r.Stdin.SHA256 = "def" }),
			failed: []string{"prompt-stdin"},
		},
		{
			name: "args changed", setup: s, second: missing, names: all,
			first:  report(t, s, func(r *api.CheckReport) { r.Argv = []string{"pi", "-p", "two", "words"} }),
			failed: []string{"args"},
		},
		{
			name: "an element fails inside", setup: s, second: missing, names: all,
			first:  report(t, s, func(r *api.CheckReport) { r.Elements[9].OK = false }),
			failed: []string{"runner"},
		},
		{
			name: "no runner", setup: checkSetup{promptSHA256: "abc", args: checkProbeArgs}, second: missing, names: all,
			first: report(t, checkSetup{promptSHA256: "abc", args: checkProbeArgs}, func(r *api.CheckReport) {
				r.Argv = checkProbeArgs
				r.Elements[9] = api.CheckElement{Name: "runner", Detail: "no runner named (BERTH_RUNNER)"}
			}),
			failed: []string{"runner"},
		},
		{
			name: "the agent started instead", setup: s,
			first:  podmanResult{stdout: []byte(`{"type":"session","id":"x"}` + "\n")},
			second: podmanResult{code: 0},
			names:  []string{"launch", "missing-prompt"}, failed: []string{"launch", "missing-prompt"},
		},
		{
			name: "did not start", setup: s,
			first:  podmanResult{code: 127, stderr: []byte("Error: crun: executable file not found\n")},
			second: podmanResult{code: 127},
			names:  []string{"launch", "missing-prompt"}, failed: []string{"launch", "missing-prompt"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			els := judgeCheck(tt.setup, tt.first, tt.second)
			var names, failed []string
			for _, e := range els {
				names = append(names, e.Name)
				if !e.OK {
					failed = append(failed, e.Name)
				}
			}
			if diff := cmp.Diff(tt.names, names); diff != "" {
				t.Errorf("elements (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.failed, failed); diff != "" {
				t.Errorf("failed elements (-want +got):\n%s\n%+v", diff, els)
			}
		})
	}
}

func TestCheckPurpose(t *testing.T) {
	tests := []struct {
		name            string
		purpose, runner string
		facts           imageFacts
		want            sandbox.Purpose
		err             string
	}{
		{name: "engineer label", facts: imageFacts{purpose: "engineer"}, want: sandbox.PurposeEngineer},
		{name: "agent label", facts: imageFacts{purpose: "agent"}, want: sandbox.PurposeAgent},
		{name: "runner label", facts: imageFacts{runner: "pi"}, want: sandbox.PurposeAgent},
		{name: "runner label beats purpose label", facts: imageFacts{runner: "pi", purpose: "engineer"}, want: sandbox.PurposeAgent},
		{name: "--runner", runner: "pi", want: sandbox.PurposeAgent},
		{name: "--runner on an engineer image", runner: "pi", facts: imageFacts{purpose: "engineer"}, want: sandbox.PurposeAgent},
		{name: "--purpose beats the labels", purpose: "engineer", facts: imageFacts{runner: "pi"}, want: sandbox.PurposeEngineer},
		{name: "--purpose agent", purpose: "agent", want: sandbox.PurposeAgent},
		{name: "no label", err: "neither a berth.runner nor a berth.purpose label: say which contract to check with --purpose"},
		{name: "odd label", facts: imageFacts{purpose: "builder"}, err: `label berth.purpose="builder" is neither agent nor engineer`},
		{name: "odd --purpose", purpose: "builder", err: `--purpose "builder": want agent or engineer`},
		{name: "engineer with a runner", purpose: "engineer", runner: "pi", err: "--runner names an agent image's runner"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := checkPurpose(tt.purpose, tt.runner, tt.facts, "img")
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("checkPurpose = %q, %v; want an error saying %q", got, err, tt.err)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Errorf("checkPurpose = %q, %v; want %q", got, err, tt.want)
			}
		})
	}
}

func TestPostCreateShape(t *testing.T) {
	tests := []struct {
		in, want, err string
	}{
		{in: `"npm ci && make"`, want: "run by the shell: npm ci && make"},
		{in: `""`, err: "the command is empty"},
		{in: `["make", "-j", "2"]`, want: "run without a shell: make -j 2"},
		{in: ` {"b": "make", "a": ["npm", "ci"]} ` + "\n", want: "2 commands, one after another: a, b"},
		{in: `{}`, err: "an object of commands names none"},
		{in: `[]`, err: "the command is empty"},
		{in: `["make", 1]`, err: "word 1 is a number; want a string"},
		{in: `{"a": ["make", null]}`, err: `a: word 1 is null; want a string`},
		{in: `{"a": {"b": "c"}}`, err: `a: it is an object; give a string, an array of strings, or an object of them`},
		{in: `{"a": []}`, err: `a: the command is empty`},
		{in: `true`, err: "it is a boolean; give a string, an array of strings, or an object of them"},
		{in: `12`, err: "it is a number"},
		{in: `null`, err: "it is null"},
		{in: `"a" "b"`, err: "not JSON"},
		{in: `["make"`, err: "not JSON"},
		{in: ``, err: "not JSON"},
	}
	for _, tt := range tests {
		got, err := postCreateShape([]byte(tt.in))
		if tt.err != "" {
			if err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Errorf("postCreateShape(%s) = %q, %v; want an error saying %q", tt.in, got, err, tt.err)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("postCreateShape(%s) = %q, %v; want %q", tt.in, got, err, tt.want)
		}
	}
}
