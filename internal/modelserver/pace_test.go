package modelserver_test

import (
	"bufio"
	"bytes"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"berth.dev/berth/internal/modelserver"
)

// TestPace plays a streamed answer at its pace: the first event First
// after the request, each next one Every after the one before; answers
// that are not streamed come at once, and without a pace every event
// does. The server runs on an in-memory connection in a synctest bubble,
// so the times are the fake clock's, exact.
func TestPace(t *testing.T) {
	pace := modelserver.Pace{First: 200 * time.Millisecond, Every: 10 * time.Millisecond}
	tests := []struct {
		name   string
		pace   *modelserver.Pace
		stream bool
		// want is when each data line arrives, after the request.
		want []time.Duration
	}{
		// Chat's text answer: role, text, finish, usage, [DONE].
		{"streamed", &pace, true, []time.Duration{200 * time.Millisecond, 210 * time.Millisecond, 220 * time.Millisecond, 230 * time.Millisecond, 240 * time.Millisecond}},
		{"not streamed", &pace, false, []time.Duration{0}},
		{"no pace", nil, true, []time.Duration{0, 0, 0, 0, 0}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var opts []modelserver.Option
				if tt.pace != nil {
					opts = append(opts, modelserver.WithPace(*tt.pace))
				}
				s := modelserver.New(scenario(t, modelserver.ScenarioText), opts...)
				srvConn, cliConn := net.Pipe()
				srv := &http.Server{Handler: s.Handler()}
				go func() { _ = srv.Serve(newPipeListener(srvConn)) }()
				defer srv.Close()
				defer cliConn.Close()

				body := `{"model":"m","stream":` + map[bool]string{true: "true", false: "false"}[tt.stream] +
					`,"messages":[{"role":"user","content":"Say hello"}]}`
				req, _ := http.NewRequest(http.MethodPost, "http://model/v1/chat/completions", strings.NewReader(body))
				req.Header.Set("Content-Type", "application/json")
				start := time.Now()
				go func() { _ = req.Write(cliConn) }()
				resp, err := http.ReadResponse(bufio.NewReader(cliConn), req)
				if err != nil {
					t.Fatal(err)
				}
				defer resp.Body.Close()
				var got []time.Duration
				lines := bufio.NewScanner(resp.Body)
				for lines.Scan() {
					if bytes.HasPrefix(lines.Bytes(), []byte("data: ")) || (!tt.stream && len(lines.Bytes()) > 0) {
						got = append(got, time.Since(start))
					}
				}
				if err := lines.Err(); err != nil && err != io.EOF {
					t.Fatal(err)
				}
				if len(got) != len(tt.want) {
					t.Fatalf("%d lines came at %v, want %d at %v", len(got), got, len(tt.want), tt.want)
				}
				for i := range got {
					if got[i] != tt.want[i] {
						t.Errorf("line %d came at %v, want %v (all: %v)", i, got[i], tt.want[i], got)
					}
				}
			})
		})
	}
}

// pipeListener hands out one connection, then waits until it is closed.
type pipeListener struct {
	conns  chan net.Conn
	closed chan struct{}
}

func newPipeListener(c net.Conn) *pipeListener {
	l := &pipeListener{conns: make(chan net.Conn, 1), closed: make(chan struct{})}
	l.conns <- c
	return l
}

func (l *pipeListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.closed:
		return nil, net.ErrClosed
	}
}

func (l *pipeListener) Close() error {
	select {
	case <-l.closed:
	default:
		close(l.closed)
	}
	return nil
}

func (l *pipeListener) Addr() net.Addr { return pipeAddr{} }

type pipeAddr struct{}

func (pipeAddr) Network() string { return "pipe" }
func (pipeAddr) String() string  { return "pipe" }
