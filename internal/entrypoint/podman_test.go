package entrypoint_test

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The sandbox image (BERTH_TEST_SANDBOX_IMAGE: one built beside it with
// BERTH_IMAGE_TAG=… images/build) and the flags the podman driver runs it
// with (S5, S11); the volume and name are added per test.
var sandboxImage = cmp.Or(os.Getenv("BERTH_TEST_SANDBOX_IMAGE"), "localhost/berth-sandbox:latest")

var hardening = []string{
	"--user", "1001:1001", "--cap-drop", "ALL", "--security-opt", "no-new-privileges",
	"--pids-limit", "256", "--memory", "512m", "--cpus", "1",
}

// TestPodmanSandbox runs the real image under podman, as the driver does, and
// logs in with the real ssh client. Gated: BERTH_TEST_PODMAN names the podman root
// holding the image (make images builds it there), and it needs root and
// ssh, scp, ssh-keyscan and ssh-keygen installed. The container joins the
// default network, or BERTH_TEST_PODMAN_NETWORK; the host dials its address.
// Everything it creates is named berth-test-… and removed at the end.
func TestPodmanSandbox(t *testing.T) {
	usePodmanRoot(t)
	needCommand(t, "podman", "ssh", "scp", "ssh-keyscan", "ssh-keygen")
	if _, err := podman(t, "image", "exists", sandboxImage); err != nil {
		t.Fatalf("%s is not built (run images/build): %v", sandboxImage, err)
	}
	if uid, _ := podman(t, "image", "inspect", "--format", `{{index .Config.Labels "berth.uid"}}`, sandboxImage); uid != "1001" {
		t.Errorf("label berth.uid = %q, want 1001", uid)
	}

	dir := t.TempDir()
	key := filepath.Join(dir, "id_ed25519")
	if out, err := exec.Command("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", key).CombinedOutput(); err != nil {
		t.Fatalf("ssh-keygen: %v\n%s", err, out)
	}
	pub, err := os.ReadFile(key + ".pub")
	if err != nil {
		t.Fatal(err)
	}

	name := testName()
	vars := map[string]string{
		"BERTH_SANDBOX_ID":       "sbx_" + strings.TrimPrefix(name, "berth-test-"),
		"BERTH_SANDBOX_NAME":     name,
		"BERTH_SANDBOX_PURPOSE":  "engineer",
		"BERTH_AUTHORIZED_KEYS":  string(pub),
		"BERTH_API_KEY":          "berth_sk_podman_test_secret",
		"BERTH_BASE_URL":         "http://host.containers.internal:8080",
		"BERTH_TASK":             "start-only task",
		"BERTH_GIT_AUTHOR_NAME":  "Test Author",
		"BERTH_GIT_AUTHOR_EMAIL": "test@example.com",
		"CALLER_VAR":             `it's "$quoted" \ value`,
	}
	args := append([]string{"run", "-d", "--name", name, "--hostname", name,
		"-v", name + ":/home/berth"}, hardening...)
	if nw := os.Getenv("BERTH_TEST_PODMAN_NETWORK"); nw != "" {
		args = append(args, "--network", nw) // one the host can dial the container on
	}
	env := os.Environ()
	for k, v := range vars {
		args = append(args, "-e", k) // by name: values travel in podman's environment
		env = append(env, k+"="+v)
	}
	args = append(args, sandboxImage)
	t.Cleanup(func() {
		podman(t, "rm", "-f", "-t", "0", name)
		podman(t, "volume", "rm", "-f", name)
	})
	started := time.Now()
	run := exec.Command("podman", args...)
	run.Env = env
	if out, err := run.CombinedOutput(); err != nil {
		t.Fatalf("podman run: %v\n%s", err, out)
	}
	ip := waitSSH(t, name)
	t.Logf("podman run -d → ssh greeting: %v", time.Since(started).Round(time.Millisecond))
	hostKey := keyscan(t, ip)

	s := sshClient{t: t, key: key}
	checks := []struct{ cmd, want string }{
		{"id -u", "1001"},
		{"id -g", "1001"},
		{"grep CapEff /proc/self/status", "CapEff:\t0000000000000000"},
		{"grep NoNewPrivs /proc/self/status", "NoNewPrivs:\t1"},
		{"printenv BERTH_SANDBOX_NAME", name},
		{"printenv CALLER_VAR", vars["CALLER_VAR"]},
		{"printenv BERTH_TASK || echo unset", "unset"},
		{"echo $HOME; pwd", "/home/berth\n/home/berth"},
		// Shells that do not come from sshd load the same environment.
		{`env -i HOME=/home/berth bash -lc 'printf %s "$BERTH_SANDBOX_NAME"'`, name},
		{`env -i HOME=/home/berth bash -ic 'printf %s "$CALLER_VAR"' 2>/dev/null`, vars["CALLER_VAR"]},
		// A login shell keeps ~/.local/bin (Debian's ~/.profile) and the
		// sandbox's PATH entries that /etc/profile leaves out.
		{`mkdir -p ~/.local/bin && bash -lc 'case $PATH in /home/berth/.local/bin:*:/usr/sbin*) echo ok;; *) echo "$PATH";; esac'`, "ok"},
		// What the user installs there runs by name in the next session,
		// a command as much as a shell.
		{`printf '#!/bin/sh\necho mine\n' >~/.local/bin/berth-mine && chmod +x ~/.local/bin/berth-mine`, ""},
		{"berth-mine", "mine"},
		{"stat -c '%u:%g %a' /home/berth", "1001:1001 700"},
		{"ls /etc/ssh/ssh_host_* 2>/dev/null || echo none", "none"},
		{"git config --global user.name", "Test Author"},
		{"readlink /usr/local/bin/git-credential-berth", "berth-init"},
		{"echo kept > ~/persist.txt && cat ~/persist.txt", "kept"},
		// sshd is PID 1 and reaps what sessions leave behind.
		{"cat /proc/1/comm", "sshd"},
		{"sh -c '(sleep 0.1 &)'; sleep 1; ps -eo stat= | grep -c '^Z' || true", "0"},
	}
	for _, c := range checks {
		if got, err := s.run(ip, c.cmd); err != nil || got != c.want {
			t.Errorf("ssh %q = %q, %v; want %q", c.cmd, got, err, c.want)
		}
	}

	// scp (the SFTP protocol against internal-sftp, OpenSSH ≥ 9).
	local := filepath.Join(dir, "upload.txt")
	write(t, local, "uploaded\n")
	scp := exec.Command("scp", append(sshOptions(key), "-P", "2222", local, "berth@"+ip+":upload.txt")...)
	scp.Env = sshEnv()
	if out, err := scp.CombinedOutput(); err != nil {
		t.Errorf("scp: %v\n%s", err, out)
	} else if got, err := s.run(ip, "cat ~/upload.txt"); got != "uploaded" {
		t.Errorf("~/upload.txt after scp = %q, %v; want %q", got, err, "uploaded")
	}

	// Suspend and resume: stop must be quick (sshd is PID 1 and handles
	// SIGTERM), and HOME, the host key and the login survive.
	begin := time.Now()
	if out, err := podman(t, "stop", name); err != nil {
		t.Fatalf("podman stop: %v\n%s", err, out)
	}
	stopTook := time.Since(begin)
	t.Logf("podman stop: %v", stopTook.Round(time.Millisecond))
	if stopTook > 5*time.Second {
		t.Errorf("podman stop took %v: the entrypoint does not end on SIGTERM", stopTook)
	}
	begin = time.Now()
	if out, err := podman(t, "start", name); err != nil {
		t.Fatalf("podman start: %v\n%s", err, out)
	}
	ip = waitSSH(t, name)
	t.Logf("podman start → ssh greeting: %v", time.Since(begin).Round(time.Millisecond))
	if got, err := s.run(ip, "cat ~/persist.txt"); err != nil || got != "kept" {
		t.Errorf("~/persist.txt after stop and start = %q, %v; want %q", got, err, "kept")
	}
	if got := keyscan(t, ip); got != hostKey {
		t.Errorf("host key changed across stop and start:\n%s\n%s", hostKey, got)
	}

	logs := containerLog(t, name)
	if !strings.Contains(logs, "berth-init: starting sshd") {
		t.Errorf("the container's log lacks berth-init's lines:\n%s", logs)
	}
	if strings.Contains(logs, vars["BERTH_API_KEY"]) {
		t.Errorf("the container's log shows BERTH_API_KEY's value:\n%s", logs)
	}
	if t.Failed() {
		t.Logf("container log:\n%s", logs)
	}
}

// TestPodmanAgent runs the image as an agent sandbox: without a command it
// waits until stopped, and a stop ends it at once (143); with one it runs
// it as the sandbox user. Gated like TestPodmanSandbox.
func TestPodmanAgent(t *testing.T) {
	usePodmanRoot(t)
	needCommand(t, "podman")
	name := testName()
	t.Cleanup(func() { podman(t, "rm", "-f", "-t", "0", name) })
	base := append([]string{"run", "--name", name,
		"-e", "BERTH_SANDBOX_ID=sbx_agent", "-e", "BERTH_SANDBOX_PURPOSE=agent"}, hardening...)

	if out, err := podman(t, append(append([]string{base[0], "-d"}, base[1:]...), sandboxImage)...); err != nil {
		t.Fatalf("agent without a command: %v\n%s", err, out)
	}
	time.Sleep(500 * time.Millisecond)
	if state, _ := podman(t, "inspect", "--format", "{{.State.Status}}", name); state != "running" {
		t.Fatalf("agent without a command is %q, want running until stopped", state)
	}
	start := time.Now()
	if out, err := podman(t, "stop", "-t", "10", name); err != nil {
		t.Fatalf("stop: %v\n%s", err, out)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("stop took %v: the waiting agent does not end on SIGTERM", d)
	}
	if code, _ := podman(t, "inspect", "--format", "{{.State.ExitCode}}", name); code != "143" {
		t.Errorf("exit code after stop = %s, want 143", code)
	}
	podman(t, "rm", "-f", name)

	out, err := podman(t, append(append([]string{base[0], "--rm"}, base[1:]...), sandboxImage, "sh", "-c", "id -u; test -s ~/.ssh/environment && echo env")...)
	if err != nil || out != "1001\nenv" {
		t.Errorf("agent with a command printed %q, %v; want %q", out, err, "1001\nenv")
	}
}

// podman runs the podman binary with the caller's environment and returns its
// stdout, trimmed; an error carries stderr.
func podman(t *testing.T, args ...string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "podman", args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		err = fmt.Errorf("podman %s: %w: %s", args[0], err, strings.TrimSpace(stderr.String()))
	}
	return strings.TrimSpace(string(out)), err
}

// containerLog is the container's output; podman logs writes the
// container's stderr, where berth-init and sshd log, to its own stderr.
func containerLog(t *testing.T, name string) string {
	t.Helper()
	out, err := exec.Command("podman", "logs", name).CombinedOutput()
	if err != nil {
		t.Errorf("podman logs: %v", err)
	}
	return string(out)
}

func exitCode(err error) int {
	if err == nil {
		return 0
	}
	if ee, ok := errors.AsType[*exec.ExitError](err); ok {
		return ee.ExitCode()
	}
	return -1
}

// testName is a name for a container and volume this test owns.
func testName() string {
	return "berth-test-" + strconv.FormatInt(time.Now().UnixNano()%1e12, 36)
}

// waitSSH waits for the container's sshd greeting on port 2222 and returns
// the container's address.
func waitSSH(t *testing.T, name string) string {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	var last error
	for time.Now().Before(deadline) {
		ip, err := podman(t, "inspect", "--format", "{{range .NetworkSettings.Networks}}{{.IPAddress}}{{end}}", name)
		if err == nil && ip != "" {
			if last = greeting(net.JoinHostPort(ip, "2222")); last == nil {
				return ip
			}
		} else {
			last = fmt.Errorf("no address yet (%v)", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	logs := containerLog(t, name)
	t.Fatalf("no ssh greeting from %s within 30s: %v\ncontainer log:\n%s", name, last, logs)
	return ""
}

func greeting(addr string) error {
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(2 * time.Second))
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		return err
	}
	if !strings.HasPrefix(line, "SSH-2.0-") {
		return fmt.Errorf("greeting %q", line)
	}
	return nil
}

func keyscan(t *testing.T, ip string) string {
	t.Helper()
	out, err := exec.Command("ssh-keyscan", "-p", "2222", "-t", "ed25519", ip).Output()
	if err != nil {
		t.Fatalf("ssh-keyscan: %v", err)
	}
	fields := strings.Fields(string(out))
	if len(fields) < 3 {
		t.Fatalf("ssh-keyscan printed %q", out)
	}
	return fields[1] + " " + fields[2]
}

// sshOptions make the real ssh client use only the test's key and trust the
// sandbox's host key, as `berth sandbox ssh` does (S10).
func sshOptions(key string) []string {
	return []string{"-F", "/dev/null", "-i", key, "-o", "IdentitiesOnly=yes",
		"-o", "StrictHostKeyChecking=no", "-o", "UserKnownHostsFile=/dev/null",
		"-o", "BatchMode=yes", "-o", "LogLevel=ERROR", "-o", "ConnectTimeout=10"}
}

// sshEnv is the test's environment without an ssh agent, which could offer
// other keys.
func sshEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "SSH_AUTH_SOCK=") {
			env = append(env, kv)
		}
	}
	return env
}

type sshClient struct {
	t   *testing.T
	key string
}

// run runs cmd in the sandbox over ssh and returns its stdout, trimmed. A
// connection that never got sshd's greeting (CI, every package at once
// under the race detector: "Connection timed out during banner
// exchange") ran nothing, and is tried once more; a command that ran is
// never run twice.
func (s sshClient) run(ip, cmd string) (string, error) {
	s.t.Helper()
	for try := 0; ; try++ {
		c := exec.Command("ssh", append(sshOptions(s.key), "-p", "2222", "berth@"+ip, cmd)...)
		c.Env = sshEnv()
		var stderr bytes.Buffer
		c.Stderr = &stderr
		out, err := c.Output()
		if err != nil && try == 0 && strings.Contains(stderr.String(), "during banner exchange") {
			s.t.Logf("ssh %s: no greeting (%s): trying once more", ip, strings.TrimSpace(stderr.String()))
			continue
		}
		if err != nil {
			err = fmt.Errorf("%w: %s", err, strings.TrimSpace(stderr.String()))
		}
		return strings.TrimSpace(string(out)), err
	}
}

// usePodmanRoot points podman at the root BERTH_TEST_PODMAN names (where
// make images built the sandbox image), or skips the test.
func usePodmanRoot(t *testing.T) {
	root := os.Getenv("BERTH_TEST_PODMAN")
	if root == "" {
		t.Skip("set BERTH_TEST_PODMAN to a podman root holding the sandbox image (make images) to run against real podman")
	}
	t.Setenv("CONTAINERS_CONF", filepath.Join(root, "containers.conf"))
	t.Setenv("CONTAINERS_STORAGE_CONF", filepath.Join(root, "storage.conf"))
}
