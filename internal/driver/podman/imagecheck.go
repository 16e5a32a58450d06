package podman

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"berth.dev/berth/internal/api"
	"berth.dev/berth/internal/runner"
	"berth.dev/berth/internal/sandbox"
)

// The agent-run contract's fixed places (SPEC S13) and what an image
// declares about itself (labels images/build sets).
const (
	checkWorkDir    = "/work"
	checkHome       = "/home/berth"
	checkPromptName = ".berth-prompt.txt"
	labelRunner     = "berth.runner"
	labelUID        = "berth.uid"
	defaultAgentUID = 1001
	checkExitUsage  = 64 // berth-init's answer to a missing prompt
	checkGatewayURL = "http://gateway.invalid:8080"
	checkModel      = "berth-image-check"
	checkSandboxID  = "sbx_imagecheck"
)

// checkProbeArgs follow the runner's own flags in the "$@" slot: what a
// careless entrypoint would split, expand or drop.
var checkProbeArgs = []string{"two words", "", "$HOME", "*"}

// ImageCheck is the result of berth image check: each element of the
// contract of the image's purpose (an agent run's, or an engineer
// sandbox's) and whether the image keeps it.
type ImageCheck struct {
	Image    string             `json:"image"`
	Purpose  string             `json:"purpose"`
	Runner   string             `json:"runner"`
	Elements []api.CheckElement `json:"elements"`
}

// CheckOptions are berth image check's choices beside the image.
type CheckOptions struct {
	// Purpose is the contract checked: agent or engineer; "" decides from
	// Runner and the image's labels (checkPurpose).
	Purpose string
	// Runner is an agent image's runner; "" is its berth.runner label.
	Runner string
	// Timeout bounds each run of the image.
	Timeout time.Duration
}

// Failed counts the elements that do not hold.
func (c ImageCheck) Failed() int {
	n := 0
	for _, e := range c.Elements {
		if !e.OK {
			n++
		}
	}
	return n
}

// podmanCmd runs the podman binary with the driver's environment.
type podmanCmd struct {
	binary string
	env    []string
}

// podmanResult is how one podman command ended.
type podmanResult struct {
	stdout, stderr []byte
	code           int // -1: it did not run to an exit
}

func (p podmanCmd) run(ctx context.Context, args ...string) (podmanResult, error) {
	c := exec.CommandContext(ctx, p.binary, args...)
	c.Env = p.env
	var stdout, stderr bytes.Buffer
	c.Stdout, c.Stderr = &stdout, &stderr
	err := c.Run()
	res := podmanResult{stdout: stdout.Bytes(), stderr: stderr.Bytes(), code: -1}
	if c.ProcessState != nil {
		res.code = c.ProcessState.ExitCode()
	}
	if _, ok := errors.AsType[*exec.ExitError](err); ok && ctx.Err() == nil {
		err = nil // an exit code is an answer
	}
	return res, err
}

// imageFacts is what the check reads from the image's configuration.
type imageFacts struct {
	runner     string   // label berth.runner
	purpose    string   // label berth.purpose
	tools      string   // label berth.tools: commands it promises on PATH
	uid        int      // label berth.uid, else 1001
	entrypoint []string // ENTRYPOINT
}

func inspectImage(ctx context.Context, p podmanCmd, image string) (imageFacts, error) {
	res, err := p.run(ctx, "image", "inspect", "--format", "{{json .Config}}", image)
	if err != nil {
		return imageFacts{}, fmt.Errorf("podman image inspect: %w", err)
	}
	if res.code != 0 {
		return imageFacts{}, fmt.Errorf("image %s is not in the podman driver's store: %s",
			image, strings.TrimSpace(string(res.stderr)))
	}
	var conf struct {
		Labels     map[string]string
		Entrypoint []string
	}
	if err := json.Unmarshal(res.stdout, &conf); err != nil {
		return imageFacts{}, fmt.Errorf("podman image inspect %s: %w", image, err)
	}
	labels := conf.Labels
	f := imageFacts{runner: labels[labelRunner], purpose: labels[labelPurpose], tools: labels[labelTools],
		uid: defaultAgentUID, entrypoint: conf.Entrypoint}
	if v, ok := labels[labelUID]; ok {
		if f.uid, err = strconv.Atoi(v); err != nil || f.uid <= 0 {
			return imageFacts{}, fmt.Errorf("image %s: label %s=%q is not a uid", image, labelUID, v)
		}
	}
	return f, nil
}

// checkRun is one run of the image for the check.
type checkRun struct {
	image, name string
	uid         int
	work        string // the host directory mounted at /work
	env         []string
	args        []string // the "$@" slot
}

// checkRunArgs is podman's argv for a check run: an agent run's hardening
// (SPEC S13) with no network at all, since launching needs none and an
// image that ignores BERTH_IMAGE_CHECK must not reach anything.
func checkRunArgs(r checkRun) []string {
	args := []string{"run", "--rm", "--name", r.name}
	args = append(args, AgentHardening(r.uid, checkHome, 256)...)
	args = append(args, "--memory", "1g", "--cpus", "1",
		"--network", "none",
		"-v", r.work+":"+checkWorkDir, "-w", checkWorkDir)
	for _, kv := range r.env {
		args = append(args, "-e", kv)
	}
	return append(append(args, r.image), r.args...)
}

// CheckImage checks that image, in the driver's store, keeps the contract
// of its purpose (berth image check; checkPurpose decides which). An
// engineer image is started as an engineer sandbox and looked at through
// its sshd (checkEngineer). An agent image keeps the agent-run contract
// (SPEC S13) without starting its agent: it runs twice under an agent
// run's hardening with no network, with a prompt file and
// BERTH_IMAGE_CHECK=1 (berth-init reports instead of starting the agent),
// then without the prompt file (exit 64), each run for at most
// opts.Timeout; the runner is opts.Runner, else the image's berth.runner
// label. podman runs with the driver's own configuration, which
// WriteConfig writes.
func (c Config) CheckImage(ctx context.Context, image string, opts CheckOptions) (ImageCheck, error) {
	c = c.withDefaults()
	p := podmanCmd{binary: c.Binary, env: c.Env()}
	facts, err := inspectImage(ctx, p, image)
	if err != nil {
		return ImageCheck{}, err
	}
	purpose, err := checkPurpose(opts.Purpose, opts.Runner, facts, image)
	if err != nil {
		return ImageCheck{}, err
	}
	if purpose == sandbox.PurposeEngineer {
		els, err := c.checkEngineer(ctx, image, facts, opts.Timeout)
		return ImageCheck{Image: image, Purpose: string(purpose), Elements: els}, err
	}
	return checkAgentImage(ctx, p, image, facts, opts.Runner, opts.Timeout)
}

// checkAgentImage runs the agent check of image and judges what it saw.
func checkAgentImage(ctx context.Context, p podmanCmd, image string, facts imageFacts, runnerName string, timeout time.Duration) (ImageCheck, error) {
	if runnerName == "" {
		runnerName = facts.runner
	}
	res := ImageCheck{Image: image, Purpose: string(sandbox.PurposeAgent), Runner: runnerName}
	setup, err := newCheckSetup(runnerName, facts.uid)
	if err != nil {
		return ImageCheck{}, err
	}
	defer os.RemoveAll(setup.dir)

	run := checkRun{image: image, uid: facts.uid, work: setup.dir, env: setup.env, args: setup.args}
	run.name = "berth-image-check-" + strings.ToLower(rand.Text()[:10])
	first, err := runOnce(ctx, p, run, timeout)
	if err != nil {
		return ImageCheck{}, err
	}
	if err := os.Remove(setup.prompt); err != nil {
		return ImageCheck{}, err
	}
	run.name = "berth-image-check-" + strings.ToLower(rand.Text()[:10])
	second, err := runOnce(ctx, p, run, timeout)
	if err != nil {
		return ImageCheck{}, err
	}
	res.Elements = judgeCheck(setup, first, second)
	return res, nil
}

// checkSetup is what the host prepared for the check runs.
type checkSetup struct {
	runner       string
	dir, prompt  string
	promptSHA256 string
	env          []string
	args         []string
}

// newCheckSetup makes the temporary checkout with its prompt file, owned by
// the agent's uid as a driver's clone is, and the variables and arguments
// the runs get.
func newCheckSetup(runnerName string, uid int) (checkSetup, error) {
	s := checkSetup{runner: runnerName}
	env := []string{
		"BERTH_SANDBOX_ID=" + checkSandboxID,
		"BERTH_SANDBOX_NAME=image-check",
		"BERTH_SANDBOX_PURPOSE=agent",
		"BERTH_IMAGE_CHECK=1",
		"BERTH_PROMPT_FILE=" + checkWorkDir + "/" + checkPromptName,
		"BERTH_GIT_AUTHOR_NAME=berth image check",
		"BERTH_GIT_AUTHOR_EMAIL=image-check@berth.invalid",
	}
	if runnerName != "" {
		rn, err := runner.Get(runnerName)
		if err != nil {
			return s, fmt.Errorf("image check: %w", err)
		}
		opts := runner.Options{Model: checkModel}
		if s.args, err = rn.ContainerArgs(opts); err != nil {
			return s, err
		}
		files, err := rn.Files(runner.Gateway{BaseURL: checkGatewayURL}, opts)
		if err != nil {
			return s, err
		}
		filesJSON, err := runner.FilesJSON(files)
		if err != nil {
			return s, err
		}
		env = append(env, "BERTH_RUNNER="+runnerName, "BERTH_RUNNER_FILES="+filesJSON)
	}
	s.env = env
	s.args = append(s.args, checkProbeArgs...)

	dir, err := os.MkdirTemp("", "berth-image-check-")
	if err != nil {
		return s, err
	}
	s.dir = dir
	prompt := "berth image check " + rand.Text() + "\nThis task is never run.\n"
	sum := sha256.Sum256([]byte(prompt))
	s.promptSHA256 = hex.EncodeToString(sum[:])
	s.prompt = filepath.Join(dir, checkPromptName)
	if err := os.WriteFile(s.prompt, []byte(prompt), 0o644); err != nil {
		os.RemoveAll(dir)
		return s, err
	}
	for _, p := range []string{dir, s.prompt} {
		if err := os.Chown(p, uid, uid); err != nil {
			// Not root: the checkout is everyone's instead, which is
			// enough for the check.
			os.Chmod(dir, 0o777)
			break
		}
	}
	return s, nil
}

// runOnce runs the image once; past the timeout the container is removed
// and the run counts as one that did not end.
func runOnce(ctx context.Context, p podmanCmd, r checkRun, timeout time.Duration) (podmanResult, error) {
	rctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	res, err := p.run(rctx, checkRunArgs(r)...)
	if rctx.Err() != nil && ctx.Err() == nil {
		cctx, ccancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer ccancel()
		p.run(cctx, "rm", "-f", "-t", "0", r.name)
		res.code = -1
		res.stderr = append(res.stderr, fmt.Sprintf("(did not end within %s)", timeout)...)
		return res, nil
	}
	if err != nil {
		return res, fmt.Errorf("podman run %s: %w", r.image, err)
	}
	return res, nil
}

// judgeCheck turns the two runs into the table's elements: launch first,
// then what berth-init reported (with the prompt and the "$@" slot checked
// against what the host gave), then the run without a prompt.
func judgeCheck(s checkSetup, first, second podmanResult) []api.CheckElement {
	var els []api.CheckElement
	add := func(name string, ok bool, format string, a ...any) {
		els = append(els, api.CheckElement{Name: name, OK: ok, Detail: fmt.Sprintf(format, a...)})
	}
	var rep api.CheckReport
	decodeErr := json.Unmarshal(bytes.TrimSpace(first.stdout), &rep)
	switch {
	case first.code != 0:
		add("launch", false, "exit %d: %s", first.code, lastLine(first.stderr))
	case decodeErr != nil || len(rep.Elements) == 0:
		add("launch", false, "the entrypoint printed no check report (is it berth-init?): %s", lastLine(first.stdout))
	default:
		add("launch", true, "ran read-only, without capabilities or network; berth-init reported")
	}
	for _, e := range rep.Elements {
		switch e.Name {
		case "prompt-stdin":
			if e.OK && rep.Stdin.SHA256 != s.promptSHA256 {
				e.OK, e.Detail = false, "stdin differs from the prompt the host wrote: "+e.Detail
			} else if e.OK {
				e.Detail += ", the prompt the host wrote"
			}
			els = append(els, e)
			if len(rep.Argv) > 0 {
				got := rep.Argv
				if rep.Runner != "" {
					got = got[1:]
				}
				if slices.Equal(got, s.args) {
					add("args", true, "\"$@\" forwarded unmodified (%d arguments)", len(got))
				} else {
					add("args", false, "\"$@\" is %q, want %q", got, s.args)
				}
			}
			continue
		case "runner":
			if s.runner == "" {
				e.Detail = "the image has no " + labelRunner + " label, and --runner was not given"
			}
		}
		els = append(els, e)
	}
	msg := lastLine(second.stderr)
	add("missing-prompt", second.code == checkExitUsage && strings.Contains(msg, "prompt"),
		"without the prompt file: exit %d: %s", second.code, msg)
	return els
}

// lastLine is the last non-empty line of out, for a table cell.
func lastLine(out []byte) string {
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	return strings.TrimSpace(lines[len(lines)-1])
}
