package podman

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"path"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"golang.org/x/crypto/ssh"

	"berth.dev/berth/internal/api"
	"berth.dev/berth/internal/devcontainer"
	"berth.dev/berth/internal/openssh"
	"berth.dev/berth/internal/quantity"
	"berth.dev/berth/internal/sandbox"
)

// What an engineer image declares and holds (images/build, berth image
// build).
const (
	// labelTools lists the commands an image promises on PATH, beyond
	// what berth-init needs (the sandbox image's toolchain).
	labelTools = "berth.tools"
	// maxPostCreate bounds the image's devcontainer.PostCreateFile read.
	maxPostCreate = 1 << 20
	// checkProbe is the program the check puts into ~/.local/bin and runs
	// by name in the next session.
	checkProbe = "berth-image-check-probe"
	// checkDeployment labels the check's container and volume: no
	// gateway's reconciler, watch or list sees them as its sandboxes.
	checkDeployment = "berth-image-check"
)

// baseTools are what berth-init runs in every engineer sandbox: git for
// the checkout and its settings, ssh-keygen for the host key (sshd itself
// is the sshd element).
var baseTools = []string{"git", "ssh-keygen"}

// toolName is a command name a berth.tools label may list.
var toolName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._+-]*$`)

// checkPurpose decides which contract berth image check holds image to:
// --purpose when given; an agent's when a runner is named (--runner or
// the berth.runner label: agent images stay agent images); else the
// image's berth.purpose label. An image that says neither is refused
// rather than guessed at.
func checkPurpose(purpose, runnerName string, f imageFacts, image string) (sandbox.Purpose, error) {
	switch p := sandbox.Purpose(purpose); {
	case p == sandbox.PurposeEngineer && runnerName != "":
		return "", errors.New("image check: --runner names an agent image's runner; an engineer image has none")
	case p == sandbox.PurposeAgent || p == sandbox.PurposeEngineer:
		return p, nil
	case purpose != "":
		return "", fmt.Errorf("image check: --purpose %q: want agent or engineer", purpose)
	case runnerName != "" || f.runner != "":
		return sandbox.PurposeAgent, nil
	}
	switch p := sandbox.Purpose(f.purpose); p {
	case sandbox.PurposeAgent, sandbox.PurposeEngineer:
		return p, nil
	case "":
		return "", fmt.Errorf("image check: image %s has neither a %s nor a %s label: say which contract to check with --purpose agent or --purpose engineer",
			image, labelRunner, labelPurpose)
	default:
		return "", fmt.Errorf("image check: image %s: label %s=%q is neither agent nor engineer", image, labelPurpose, f.purpose)
	}
}

// checkEngineer starts image as the driver starts an engineer sandbox
// (RunArgs: the sandbox uid, every capability dropped, no new privileges,
// HOME on a named volume of its own, the sandboxes' network) with the
// environment berth-init needs for an engineer start and a key made for
// the check, then looks at it as its engineer would: through sshd on port
// 2222, logged in with that key as the user `berth sandbox config` names.
// The start and the sessions take at most timeout together; the container
// and its volume are removed after.
func (c Config) checkEngineer(ctx context.Context, image string, f imageFacts, timeout time.Duration) ([]api.CheckElement, error) {
	var els []api.CheckElement
	add := func(name string, ok bool, format string, a ...any) {
		els = append(els, api.CheckElement{Name: name, OK: ok, Detail: fmt.Sprintf(format, a...)})
	}
	switch {
	case len(f.entrypoint) > 0 && path.Base(f.entrypoint[0]) == "berth-init":
		add("entrypoint", true, "%s", strings.Join(f.entrypoint, " "))
	case len(f.entrypoint) == 0:
		add("entrypoint", false, "none; want berth-init (it writes the authorized keys and starts sshd)")
	default:
		add("entrypoint", false, "ENTRYPOINT %q, want berth-init (it writes the authorized keys and starts sshd)", f.entrypoint)
	}

	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, err
	}
	signer, err := ssh.NewSignerFromKey(priv)
	if err != nil {
		return nil, err
	}

	cc := c
	cc.Deployment, cc.ReadyTimeout = checkDeployment, timeout
	d, err := New(cc, slog.New(slog.DiscardHandler))
	if err != nil {
		return nil, err
	}
	sb := sandbox.Sandbox{
		ID: sandbox.ID("imagecheck-" + strings.ToLower(rand.Text()[:10])), Name: "image-check",
		Owner: "image-check", Org: "image-check", Project: "image-check",
		Purpose: sandbox.PurposeEngineer, Image: image,
		CPU: 1000, Memory: quantity.Bytes(2 << 30),
	}
	env := map[string]string{
		"BERTH_SANDBOX_ID":      string(sb.ID),
		"BERTH_SANDBOX_NAME":    sb.Name,
		"BERTH_SANDBOX_PURPOSE": string(sandbox.PurposeEngineer),
		// berth-init then leaves the image's postCreateCommand alone: the
		// check runs none of the image's own code.
		"BERTH_IMAGE_CHECK":     "1",
		"BERTH_AUTHORIZED_KEYS": strings.TrimSpace(string(ssh.MarshalAuthorizedKey(signer.PublicKey()))) + " berth-image-check",
	}
	defer func() {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		d.Remove(cctx, sb.ID)
	}()

	rctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	start := time.Now()
	err = d.Start(rctx, sandbox.Spec{Sandbox: sb, Env: env})
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	if err != nil {
		add("sshd", false, "%v", err)
	} else {
		add("sshd", true, "answered on port %d %s after the start, which ran as the podman driver runs an engineer sandbox",
			sshPort, time.Since(start).Round(10*time.Millisecond))
		els = append(els, c.checkSessions(rctx, d, sb.ID, signer, f)...)
	}
	if el, ok := c.checkPostCreate(ctx, d.cfg.name(sb.ID)); ok {
		els = append(els, el)
	}
	return els, ctx.Err()
}

// checkSessions logs in as the engineer would and checks what they find:
// their uid, a writable HOME, ~/.local/bin on PATH (a program put there
// runs by name in the next session) and the tools.
func (c Config) checkSessions(ctx context.Context, d *Driver, id sandbox.ID, signer ssh.Signer, f imageFacts) []api.CheckElement {
	var els []api.CheckElement
	add := func(name string, ok bool, format string, a ...any) {
		els = append(els, api.CheckElement{Name: name, OK: ok, Detail: fmt.Sprintf(format, a...)})
	}
	client, err := dialSSH(ctx, d, id, signer)
	if err != nil {
		add("login", false, "as %s with the check's key: %v", openssh.User, err)
		return els
	}
	defer client.Close()
	add("login", true, "as %s with the check's key (%s); the server says %s", openssh.User,
		ssh.FingerprintSHA256(signer.PublicKey()), client.ServerVersion())

	uid, err := runSSH(client, "id -u")
	switch {
	case err != nil:
		add("non-root", false, "%v", err)
	case uid == "0" || uid != strconv.Itoa(f.uid):
		add("non-root", false, "a session runs as uid %s; want the image's %s label, %d", uid, labelUID, f.uid)
	case f.uid != sandboxUID:
		add("non-root", false, "label %s=%d, but the podman driver runs every engineer sandbox as uid %d", labelUID, f.uid, sandboxUID)
	default:
		add("non-root", true, "a session runs as uid %s, the image's %s", uid, labelUID)
	}

	home, err := runSSH(client, `cd && f=$(mktemp "$HOME/.berth-image-check.XXXXXX") && rm -f "$f" && printf '%s\n' "$HOME"`)
	switch {
	case err != nil:
		add("home", false, "%v", err)
	case home != sandboxHome:
		add("home", false, "HOME is %s; want %s, the sandbox's own volume", home, sandboxHome)
	default:
		add("home", true, "HOME %s, the sandbox's volume, is writable", home)
	}

	els = append(els, localBin(client))

	promised := slices.DeleteFunc(strings.Fields(f.tools), func(t string) bool { return slices.Contains(baseTools, t) })
	if bad := slices.DeleteFunc(slices.Clone(promised), toolName.MatchString); len(bad) > 0 {
		add("tools", false, "label %s names %q, which are not command names", labelTools, bad)
		return els
	}
	want := slices.Concat(baseTools, promised)
	out, err := runSSH(client, `for t in `+strings.Join(want, " ")+`; do command -v "$t" >/dev/null 2>&1 || printf '%s\n' "$t"; done`)
	switch {
	case err != nil:
		add("tools", false, "%v", err)
	case out != "":
		add("tools", false, "not on PATH: %s", strings.Join(strings.Fields(out), ", "))
	case len(promised) == 0:
		add("tools", true, "on PATH: %s (berth-init's; no %s label promises more)", strings.Join(baseTools, ", "), labelTools)
	default:
		add("tools", true, "on PATH: %s (berth-init's) and the %d its %s label promises: %s",
			strings.Join(baseTools, ", "), len(promised), labelTools, strings.Join(promised, " "))
	}
	return els
}

// localBin checks what the README promises of ~/.local/bin: on PATH in
// every session, so a program copied there runs by name in the next one.
func localBin(client *ssh.Client) api.CheckElement {
	el := api.CheckElement{Name: "local-bin"}
	dir := sandboxHome + "/.local/bin"
	probe := `"$HOME/.local/bin/` + checkProbe + `"`
	out, err := runSSH(client, `mkdir -p "$HOME/.local/bin" && printf '#!/bin/sh\necho %s\n' `+checkProbe+` >`+probe+
		` && chmod 0755 `+probe+` && printf '%s\n' "$PATH"`)
	switch {
	case err != nil:
		el.Detail = err.Error()
	case !slices.Contains(strings.Split(out, ":"), dir):
		el.Detail = fmt.Sprintf("%s is not on a session's PATH %s", dir, out)
	default:
		if ran, err := runSSH(client, checkProbe); err != nil || ran != checkProbe {
			el.Detail = fmt.Sprintf("%s is on PATH, but a program put there does not run by name in the next session: %q, %v", dir, ran, err)
			return el
		}
		el.OK = true
		el.Detail = fmt.Sprintf("%s is on a session's PATH (%s), and a program put there runs by name in the next session", dir, out)
	}
	return el
}

// dialSSH opens an SSH connection to the sandbox's sshd as the engineer's
// ssh does: to port 2222 of its address, as openssh.User, with the key.
// The host key is the one berth-init made at this start, which nobody can
// know before: any is taken. The connection lasts at most until ctx's
// deadline.
func dialSSH(ctx context.Context, d *Driver, id sandbox.ID, signer ssh.Signer) (*ssh.Client, error) {
	addr, err := d.Addr(ctx, id, sshPort)
	if err != nil {
		return nil, err
	}
	conn, err := (&net.Dialer{}).DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	if dl, ok := ctx.Deadline(); ok {
		conn.SetDeadline(dl)
	}
	stop := context.AfterFunc(ctx, func() { conn.Close() })
	cfg := &ssh.ClientConfig{
		User:            openssh.User,
		Auth:            []ssh.AuthMethod{ssh.PublicKeys(signer)},
		HostKeyCallback: func(string, net.Addr, ssh.PublicKey) error { return nil },
	}
	sc, chans, reqs, err := ssh.NewClientConn(conn, addr, cfg)
	if err != nil {
		stop()
		conn.Close()
		return nil, err
	}
	return ssh.NewClient(sc, chans, reqs), nil
}

// runSSH runs cmd in a session of its own and returns its output, trimmed.
func runSSH(client *ssh.Client, cmd string) (string, error) {
	s, err := client.NewSession()
	if err != nil {
		return "", err
	}
	defer s.Close()
	var out, errb bytes.Buffer
	s.Stdout, s.Stderr = &out, &errb
	if err := s.Run(cmd); err != nil {
		if msg := strings.TrimSpace(errb.String()); msg != "" {
			return "", fmt.Errorf("%v: %s", err, lastLine(errb.Bytes()))
		}
		return "", err
	}
	return strings.TrimSpace(out.String()), nil
}

// checkPostCreate reads the image's postCreateCommand from the check's
// container, if the image has one, and checks its shape.
func (c Config) checkPostCreate(ctx context.Context, container string) (api.CheckElement, bool) {
	el := api.CheckElement{Name: "post-create"}
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	res, err := podmanCmd{binary: c.Binary, env: c.Env()}.run(cctx, "cp", container+":"+devcontainer.PostCreateFile, "-")
	switch {
	case err != nil:
		el.Detail = fmt.Sprintf("podman cp %s: %v", devcontainer.PostCreateFile, err)
		return el, true
	case res.code != 0 && strings.Contains(string(res.stderr), "no such file or directory"):
		return el, false // the image has none
	case res.code != 0 && strings.Contains(string(res.stderr), "does not exist"):
		return el, false // no container: the sshd element says why
	case res.code != 0:
		el.Detail = fmt.Sprintf("podman cp %s: exit %d: %s", devcontainer.PostCreateFile, res.code, lastLine(res.stderr))
		return el, true
	}
	tr := tar.NewReader(bytes.NewReader(res.stdout))
	hdr, err := tr.Next()
	switch {
	case err != nil:
		el.Detail = fmt.Sprintf("podman cp %s: %v", devcontainer.PostCreateFile, err)
		return el, true
	case hdr.Typeflag != tar.TypeReg:
		el.Detail = devcontainer.PostCreateFile + " is not a regular file"
		return el, true
	case hdr.Size > maxPostCreate:
		el.Detail = fmt.Sprintf("%s is %d bytes; at most %d", devcontainer.PostCreateFile, hdr.Size, maxPostCreate)
		return el, true
	}
	b, err := io.ReadAll(tr)
	if err != nil {
		el.Detail = fmt.Sprintf("podman cp %s: %v", devcontainer.PostCreateFile, err)
		return el, true
	}
	shape, err := postCreateShape(b)
	if err != nil {
		el.Detail = devcontainer.PostCreateFile + ": " + err.Error()
		return el, true
	}
	el.OK, el.Detail = true, devcontainer.PostCreateFile+": "+shape
	return el, true
}

// postCreateShape says what a postCreateCommand runs, as berth-init
// reads it (devcontainer.ParseCommand); an error says what is wrong.
func postCreateShape(b []byte) (string, error) {
	c, err := devcontainer.ParseCommand(b)
	if err != nil {
		return "", err
	}
	return c.Describe(), nil
}
