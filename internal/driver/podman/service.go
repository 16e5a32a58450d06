package podman

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"berth.dev/berth/internal/fault"
)

// The podman service (`podman system service`), for the calls on a
// start's path that need no process of their own. Each run of the podman
// binary costs some 30 ms here before it does anything (more under load):
// a create made its volume with one and read the container's address with
// another, about 60 ms of the 70 a create took beyond a bare `podman
// run`. Through the service's socket each is a few milliseconds. The
// service is the driver's child, on a socket in its own state directory
// (0700, root's: whoever reaches it commands podman), ended with the
// gateway (the parent-death signal, and at the next start a stale one's
// pid file). Every call falls back to the binary when the service does
// not answer, so it only ever makes a call quicker. `podman run` goes
// through it too (runapi.go), with the environment in the request; the
// binary, which reads it from an env file, runs what the service cannot
// take.

// apiVersion is the libpod API the calls are made to (podman 4).
const apiVersion = "v4.0.0"

// service is a running podman service and a client of its socket.
type service struct {
	sock  string
	cmd   *exec.Cmd
	ended chan struct{} // closed once cmd has ended
	http  *http.Client
}

// serviceSocket is the service's socket for this deployment.
func (c Config) serviceSocket() string {
	return filepath.Join(c.StateDir, "service", strings.ReplaceAll(c.Deployment, string(filepath.Separator), "_")+".sock")
}

// service is the podman service when it answers, else nil. The first
// call starts it (ending one a killed gateway left) in the background:
// calls use it once it answers, and the binary until then, or for good
// when it does not start. (Not at New: a driver that never reaches podman
// has no service, and its state directory no storage mounted.)
func (d *Driver) service() *service {
	d.svcOnce.Do(d.startService)
	return d.svc.Load()
}

func (d *Driver) startService() {
	if !d.real {
		return // tests' runners answer for podman: no service
	}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	d.mu.Lock()
	d.svcDone = make(chan struct{})
	done := d.svcDone
	d.mu.Unlock()
	go func() {
		defer close(done)
		defer cancel()
		svc, err := d.serve(ctx)
		if err != nil {
			d.log.Warn("the podman service did not start: every podman call runs the podman binary", "err", err)
			return
		}
		d.svc.Store(svc)
	}()
}

// Close ends the podman service, if it runs.
func (d *Driver) Close() error {
	d.svcOnce.Do(func() {}) // none starts after this
	d.mu.Lock()
	done := d.svcDone
	d.mu.Unlock()
	if done == nil {
		return nil
	}
	<-done
	svc := d.svc.Swap(nil)
	if svc == nil || svc.cmd == nil {
		return nil
	}
	_ = svc.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-svc.ended:
	case <-time.After(5 * time.Second):
		_ = svc.cmd.Process.Kill()
		<-svc.ended
	}
	_ = os.Remove(svc.sock + ".pid")
	return nil
}

// serve starts the podman service and waits until it answers.
func (d *Driver) serve(ctx context.Context) (*service, error) {
	sock := d.cfg.serviceSocket()
	if _, err := privateDir(filepath.Dir(sock)); err != nil {
		return nil, err
	}
	pidFile := sock + ".pid"
	if b, err := os.ReadFile(pidFile); err == nil {
		// A killed gateway's service: its parent-death signal may not
		// have come (it was a thread's, not the process's).
		if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil && pid > 1 && ownService(pid, sock) {
			_ = syscall.Kill(pid, syscall.SIGTERM)
		}
	}
	_ = os.Remove(sock)
	cmd := exec.Command(d.cfg.Binary, "system", "service", "--time=0", "unix://"+sock)
	cmd.Env = d.cfg.Env()
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGTERM}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("podman system service: %w", err)
	}
	ended := make(chan struct{})
	go func() { _ = cmd.Wait(); close(ended) }() // reaped whenever it ends
	if err := os.WriteFile(pidFile, []byte(strconv.Itoa(cmd.Process.Pid)+"\n"), 0o600); err != nil {
		_ = cmd.Process.Kill()
		return nil, err
	}
	s := &service{sock: sock, cmd: cmd, ended: ended, http: &http.Client{
		Timeout: 30 * time.Second,
		Transport: &http.Transport{
			DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
				return (&net.Dialer{}).DialContext(ctx, "unix", sock)
			},
			MaxIdleConnsPerHost: 8,
		},
	}}
	for deadline := time.Now().Add(10 * time.Second); ; {
		if _, err := s.call(ctx, http.MethodGet, "/_ping", nil); err == nil {
			return s, nil
		}
		if time.Now().After(deadline) {
			_ = cmd.Process.Kill()
			return nil, errors.New("podman system service did not answer within 10s")
		}
		select {
		case <-ctx.Done():
			_ = cmd.Process.Kill()
			return nil, ctx.Err()
		case <-ended:
			return nil, errors.New("podman system service ended at once")
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// ownService reports whether pid is a podman service on sock.
func ownService(pid int, sock string) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	return err == nil && bytes.Contains(b, []byte("system\x00service")) && bytes.Contains(b, []byte("unix://"+sock))
}

// apiError is a call the service refused, with its status and message.
type apiError struct {
	status int
	msg    string
}

func (e *apiError) Error() string { return fmt.Sprintf("podman service: %d %s", e.status, e.msg) }

// call makes one call to the service and returns the body of a 2xx answer.
func (s *service) call(ctx context.Context, method, path string, body any) ([]byte, error) {
	var in io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return nil, err
		}
		in = bytes.NewReader(b)
	}
	u := "http://podman/" + apiVersion + "/libpod" + path
	if path == "/_ping" {
		u = "http://podman/_ping" // not versioned
	}
	req, err := http.NewRequestWithContext(ctx, method, u, in)
	if err != nil {
		return nil, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := s.http.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
	if err != nil {
		return nil, err
	}
	if resp.StatusCode/100 != 2 {
		var e struct{ Message string }
		_ = json.Unmarshal(out, &e)
		return nil, &apiError{status: resp.StatusCode, msg: e.Message}
	}
	return out, nil
}

// serviceInspect is `podman container inspect` through the service; ok is
// false when the service did not answer (the binary is asked instead).
func (d *Driver) serviceInspect(ctx context.Context, name string) (cur inspected, ok bool, err error) {
	svc := d.service()
	if svc == nil {
		return inspected{}, false, nil
	}
	out, err := svc.call(ctx, http.MethodGet, "/containers/"+url.PathEscape(name)+"/json", nil)
	var ae *apiError
	switch {
	case errors.As(err, &ae) && ae.status == http.StatusNotFound:
		return inspected{}, true, fault.Errorf(fault.NotFound, "podman: container %s", name)
	case errors.As(err, &ae):
		return inspected{}, true, fmt.Errorf("podman inspect %s: %w", name, err)
	case err != nil:
		d.log.WarnContext(ctx, "the podman service did not answer; asking the podman binary", "err", err)
		return inspected{}, false, nil
	}
	if err := json.Unmarshal(out, &cur); err != nil {
		return inspected{}, true, fmt.Errorf("podman inspect %s: unexpected answer: %w", name, err)
	}
	return cur, true, nil
}

// startContainer is `podman start NAME`, through the service when it
// answers: the binary costs some 20–30 ms before it does anything, on a
// resume's path. A container already running is started.
func (d *Driver) startContainer(ctx context.Context, name string) error {
	return d.containerAction(ctx, "start", name)
}

// initContainer is `podman init NAME`: the container made (its network,
// its conmon, the runtime's create) but not started. One already made is
// made.
func (d *Driver) initContainer(ctx context.Context, name string) error {
	return d.containerAction(ctx, "init", name)
}

// containerAction is `podman ACTION NAME` for an action the service
// answers 304 to when it has nothing to do (start, init), through the
// service when it answers, else the binary.
func (d *Driver) containerAction(ctx context.Context, action, name string) error {
	if svc := d.service(); svc != nil {
		_, err := svc.call(ctx, http.MethodPost, "/containers/"+url.PathEscape(name)+"/"+action, nil)
		var ae *apiError
		switch {
		case err == nil, errors.As(err, &ae) && ae.status == http.StatusNotModified:
			return nil
		case errors.As(err, &ae) && ae.status == http.StatusNotFound:
			return fault.Errorf(fault.NotFound, "podman: container %s", name)
		case errors.As(err, &ae):
			return fmt.Errorf("podman %s %s: %s", action, name, ae.msg)
		}
		d.log.WarnContext(ctx, "the podman service did not answer; asking the podman binary", "err", err)
	}
	_, err := d.run(ctx, nil, action, name)
	return err
}

// serviceVolume is `podman volume create` through the service: nil when
// made or there already; ok false when the service did not answer.
func (d *Driver) serviceVolume(ctx context.Context, name string, labels map[string]string) (ok bool, err error) {
	svc := d.service()
	if svc == nil {
		return false, nil
	}
	_, err = svc.call(ctx, http.MethodPost, "/volumes/create", map[string]any{"Name": name, "Label": labels})
	var ae *apiError
	switch {
	case err == nil:
		return true, nil
	case errors.As(err, &ae) && (ae.status == http.StatusConflict || strings.Contains(ae.msg, "already exists")):
		return true, nil // there already: a replaced container keeps its home
	case errors.As(err, &ae):
		return true, fmt.Errorf("podman volume create %s: %w", name, err)
	default:
		d.log.WarnContext(ctx, "the podman service did not answer; asking the podman binary", "err", err)
		return false, nil
	}
}
