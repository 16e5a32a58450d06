package entrypoint

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"

	"berth.dev/berth/internal/api"
	"berth.dev/berth/internal/secret"
)

const (
	// runTries is how often a call of a run route is tried when the
	// gateway cannot be reached or answers 5xx (a rollout).
	runTries = 5
	// maxAnswer bounds what berth-init reads of an answer: the task is
	// the longest.
	maxAnswer = 16 << 20
	// spoolMemoryLimit bounds the copy of the output kept in memory when
	// no spool file can be made.
	spoolMemoryLimit = 64 << 20
)

// runGateway calls the run routes.
type runGateway struct {
	base string
	key  secret.Secret // the sandbox's
	hc   *http.Client  // short calls
	// long is for the output, whose request lasts as long as the agent
	// runs: no overall timeout.
	long  *http.Client
	delay time.Duration // between tries
	logf  func(format string, args ...any)
}

func newRunGateway(cfg config, env Env, delay time.Duration, logf func(string, ...any)) *runGateway {
	hc := env.HTTP
	if hc == nil {
		hc = &http.Client{Timeout: 30 * time.Second}
	}
	long := *hc
	long.Timeout = 0
	return &runGateway{
		base: strings.TrimSuffix(cfg.baseURL, "/"), key: cfg.apiKey,
		hc: hc, long: &long, delay: delay, logf: logf,
	}
}

// task fetches the run's task.
func (g *runGateway) task(ctx context.Context) ([]byte, error) {
	var task []byte
	err := g.retry(ctx, "fetch the task", func() (bool, error) {
		var again bool
		var err error
		task, again, err = g.call(ctx, g.hc, http.MethodGet, api.RunTaskPath, "", nil)
		return again, err
	})
	return task, err
}

// reportExit tells the gateway how the run ended, and logs what the
// gateway made of it: the run's work lands only through it.
func (g *runGateway) reportExit(ctx context.Context, rep api.RunExit) error {
	body, err := json.Marshal(rep)
	if err != nil {
		return err
	}
	var answer []byte
	err = g.retry(ctx, "report the exit", func() (bool, error) {
		var again bool
		var err error
		answer, again, err = g.call(ctx, g.hc, http.MethodPost, api.RunExitPath, "application/json", bytes.NewReader(body))
		return again, err
	})
	if err != nil {
		return err
	}
	var run api.Run
	if json.Unmarshal(answer, &run) == nil && run.State != "" {
		switch {
		case run.Error != "":
			g.logf("the gateway concluded the run %s: %s", run.State, run.Error)
		case run.Commit != "":
			g.logf("the gateway concluded the run %s: %s is at %s", run.State, run.Branch, run.Commit)
		default:
			g.logf("the gateway concluded the run %s", run.State)
		}
	}
	return nil
}

// retry calls try up to runTries times, delay apart, while it fails in a
// way another try may mend.
func (g *runGateway) retry(ctx context.Context, what string, try func() (again bool, err error)) error {
	for n := 1; ; n++ {
		again, err := try()
		if err == nil || !again || n == runTries {
			return err
		}
		g.logf("%s: %v; trying again (%d of %d)", what, err, n+1, runTries)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(g.delay):
		}
	}
}

// call makes one request with the sandbox's key.
func (g *runGateway) call(ctx context.Context, hc *http.Client, method, path, contentType string, body io.Reader) (answer []byte, again bool, err error) {
	return gatewayCall(ctx, hc, g.base, g.key, method, path, contentType, body)
}

// gatewayCall makes one request to the gateway at base with bearer as its
// credential (the sandbox's key, or a pool's one-time token) and returns
// the answer's body. again says whether a failure may pass: the gateway
// was not reached or answered 5xx.
func gatewayCall(ctx context.Context, hc *http.Client, base string, bearer secret.Secret, method, path, contentType string, body io.Reader) (answer []byte, again bool, err error) {
	req, err := http.NewRequestWithContext(ctx, method, base+path, body)
	if err != nil {
		return nil, false, err
	}
	req.Header.Set("Authorization", "Bearer "+bearer.Reveal())
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, true, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswer+1))
	if err != nil {
		return nil, true, fmt.Errorf("%s %s: read the answer: %w", method, path, err)
	}
	if resp.StatusCode/100 != 2 {
		return nil, resp.StatusCode >= 500, &answerError{status: resp.StatusCode, text: fmt.Sprintf("%s %s: the gateway answered %s%s", method, path, resp.Status, gatewayMessage(b))}
	}
	if len(b) > maxAnswer {
		return nil, false, fmt.Errorf("%s %s: the answer is over %d MiB", method, path, maxAnswer>>20)
	}
	return b, false, nil
}

// answerError is the gateway's answer of an error status.
type answerError struct {
	status int
	text   string
}

func (e *answerError) Error() string { return e.text }

// gatewayMessage is ": code: message" of the gateway's error body (its
// api.Error); "" when the body is none (a proxy's page).
func gatewayMessage(body []byte) string {
	var e api.Error
	if json.Unmarshal(body, &e) != nil || (e.Code == "" && e.Message == "") {
		return ""
	}
	return ": " + strings.TrimPrefix(e.Code+": "+e.Message, ": ")
}

// outputStream carries the agent's output lines to the gateway as they
// come, in one streaming request, and keeps a copy in a spool: the gateway
// reads a run's output from its first line on every request, so when the
// stream breaks the whole output is sent again once the agent is done.
type outputStream struct {
	g      *runGateway
	mu     sync.Mutex // one line at a time: lines stay whole
	body   *io.PipeWriter
	lost   bool // a line did not reach the request
	spool  *spool
	result chan error // the request's outcome
}

// errOutputEnded unblocks a line written after the request ended.
var errOutputEnded = errors.New("the output's request ended")

// openOutput starts the streaming request. The caller must end it.
func (g *runGateway) openOutput(ctx context.Context, sp *spool) *outputStream {
	pr, pw := io.Pipe()
	o := &outputStream{g: g, body: pw, spool: sp, result: make(chan error, 1)}
	go func() {
		_, _, err := g.call(ctx, g.long, http.MethodPost, api.RunOutputPath, "text/plain; charset=utf-8", pr)
		// Whatever the answer, nobody reads the body any more: a line
		// written now must fail, not wait.
		pr.CloseWithError(errOutputEnded)
		o.result <- err
	}()
	return o
}

// copyLines hands on the lines read from r, one stream of the agent's
// output, until it ends. A line is read whole whatever its length (a
// runner's JSON event may carry a whole file).
func (o *outputStream) copyLines(r io.ReadCloser, local io.Writer, mark string) {
	// Closed whatever happens: its writer must never wait on a reader
	// that left.
	defer r.Close()
	br := bufio.NewReaderSize(r, 64<<10)
	for {
		line, err := br.ReadBytes('\n')
		if len(line) > 0 {
			o.line(local, mark, line)
		}
		if err != nil {
			return
		}
	}
}

// line hands on one line: unchanged to local (berth-init's own stdout or
// stderr, the pod's log), and after its stream's mark, ended by a newline,
// to the gateway and the spool.
func (o *outputStream) line(local io.Writer, mark string, line []byte) {
	rec := make([]byte, 0, len(mark)+len(line)+1)
	rec = append(append(rec, mark...), line...)
	if line[len(line)-1] != '\n' {
		rec = append(rec, '\n')
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	_, _ = local.Write(line) // the log is best effort; the gateway's copy is not
	o.spool.write(rec)
	if !o.lost {
		if _, err := o.body.Write(rec); err != nil {
			o.lost = true
		}
	}
}

// end ends the request once the agent's output is all read, and when the
// gateway did not get all of it, sends it again, whole, from the spool.
// Failures are logged: the output matters less than the exit report.
func (o *outputStream) end(ctx context.Context) {
	o.body.Close()
	err := <-o.result
	o.mu.Lock()
	lost := o.lost
	o.mu.Unlock()
	if err == nil && !lost {
		return
	}
	if err == nil {
		err = errors.New("the gateway answered before the output ended")
	}
	o.g.logf("send the output: %v; sending it again, whole", err)
	if o.spool.err != nil {
		o.g.logf("the copy sent again is incomplete: %v", o.spool.err)
	}
	err = o.g.retry(ctx, "send the output again", func() (bool, error) {
		_, again, err := o.g.call(ctx, o.g.long, http.MethodPost, api.RunOutputPath, "text/plain; charset=utf-8", o.spool.contents())
		return again, err
	})
	if err != nil {
		o.g.logf("send the output again: %v; the gateway lacks the agent's output", err)
	}
}

// spool keeps a copy of the output: in a file under os.TempDir, or when
// none can be made there, in memory up to spoolMemoryLimit.
type spool struct {
	file *os.File
	size int64
	mem  bytes.Buffer
	err  error // why the copy is incomplete: nothing is kept after it
}

// newSpool returns a spool in a file, or in memory with the reason.
func newSpool() (*spool, error) {
	f, err := os.CreateTemp("", "berth-run-output-*")
	if err != nil {
		return &spool{}, err
	}
	// Unlinked at once: the open file stays readable, and nothing is
	// left behind whatever ends berth-init.
	if err := os.Remove(f.Name()); err != nil {
		f.Close()
		return &spool{}, err
	}
	return &spool{file: f}, nil
}

func (s *spool) write(p []byte) {
	switch {
	case s.err != nil:
	case s.file != nil:
		n, err := s.file.Write(p)
		s.size += int64(n)
		s.err = err
	case s.mem.Len()+len(p) > spoolMemoryLimit:
		s.err = fmt.Errorf("the output passed %d MiB, the most kept in memory", spoolMemoryLimit>>20)
	default:
		s.mem.Write(p)
	}
}

// contents reads what was kept, from the first line.
func (s *spool) contents() io.Reader {
	if s.file == nil {
		return bytes.NewReader(s.mem.Bytes())
	}
	return io.NewSectionReader(s.file, 0, s.size)
}

func (s *spool) close() {
	if s.file != nil {
		s.file.Close()
	}
}
