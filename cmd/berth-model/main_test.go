package main

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"berth.dev/berth/internal/modelserver"
)

// listening matches the line berth-model prints once it listens.
var listening = regexp.MustCompile(`^berth-model: listening on (http://127\.0\.0\.1:\d+) \((.+)\)\n$`)

// syncBuffer is a bytes.Buffer safe to write from run and read from the test.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func TestRunServesScriptFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "demo.json")
	if err := os.WriteFile(path, []byte(`{"turns": [{"text": "from the file"}]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	stdout, stderr := &syncBuffer{}, &syncBuffer{}
	code := make(chan int, 1)
	go func() { code <- run(ctx, []string{"-addr", "127.0.0.1:0", "-script", path}, os.Getenv, stdout, stderr) }()

	var url string
	for deadline := time.Now().Add(10 * time.Second); url == "" && time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if m := listening.FindStringSubmatch(stdout.String()); m != nil {
			url = m[1]
			if m[2] != "script "+path {
				t.Errorf("announced %q, want the script file", m[2])
			}
		}
	}
	if url == "" {
		cancel()
		t.Fatalf("no listening line; stdout %q stderr %q", stdout.String(), stderr.String())
	}
	resp, err := http.Post(url+"/v1/chat/completions", "application/json", strings.NewReader(`{"model":"m","messages":[]}`))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(body), "from the file") {
		t.Errorf("answer %s, want the script's text", body)
	}
	cancel()
	if c := <-code; c != 0 {
		t.Errorf("run = %d after the context ended, want 0; stderr %s", c, stderr.String())
	}
	if !strings.Contains(stderr.String(), "model call") {
		t.Errorf("stderr %q, want a log line per call", stderr.String())
	}
}

func TestRunRefusesBadInput(t *testing.T) {
	bad := filepath.Join(t.TempDir(), "bad.json")
	if err := os.WriteFile(bad, []byte(`{"turns": []}`), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		args []string
		want int
	}{
		{"unknown scenario", []string{"-scenario", "nope"}, 2},
		{"invalid script", []string{"-script", bad}, 2},
		{"stray argument", []string{"extra"}, 2},
		{"unknown flag", []string{"-port", "1"}, 2},
		{"address taken or invalid", []string{"-addr", "127.0.0.1:-1"}, 1},
		{"help", []string{"-h"}, 0},
		{"unknown vendor", []string{"-vendor", "cohere", "-key-env", "VENDOR_KEY"}, 2},
		{"vendor without a key", []string{"-vendor", "openai"}, 2},
		{"vendor key unset", []string{"-vendor", "openai", "-key-env", "UNSET_KEY"}, 2},
		{"key without a vendor", []string{"-key-env", "VENDOR_KEY"}, 2},
		{"pace without its second half", []string{"-pace", "200ms"}, 2},
		{"pace not durations", []string{"-pace", "soon,later"}, 2},
		{"pace negative", []string{"-pace", "200ms,-1ms"}, 2},
	}
	getenv := func(k string) string { return map[string]string{"VENDOR_KEY": "sk-test"}[k] }
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			if got := run(t.Context(), tt.args, getenv, &stdout, &stderr); got != tt.want {
				t.Errorf("run(%q) = %d, want %d; stderr %s", tt.args, got, tt.want, stderr.String())
			}
			if stdout.Len() != 0 {
				t.Errorf("stdout %q, want nothing", stdout.String())
			}
		})
	}
}

// The built command stops cleanly on SIGTERM and SIGINT.
func TestStopsOnSignal(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "berth-model")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGINT} {
		t.Run(sig.String(), func(t *testing.T) {
			cmd := exec.Command(bin, "-addr", "127.0.0.1:0", "-scenario", modelserver.ScenarioError)
			stdout, err := cmd.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			line, err := bufio.NewReader(stdout).ReadString('\n')
			if m := listening.FindStringSubmatch(line); m == nil || m[2] != "scenario error" {
				cmd.Process.Kill()
				cmd.Wait()
				t.Fatalf("first line %q (%v), want the listening line for scenario error", line, err)
			}
			if err := cmd.Process.Signal(sig); err != nil {
				t.Fatal(err)
			}
			done := make(chan error, 1)
			go func() { done <- cmd.Wait() }()
			select {
			case err := <-done:
				if err != nil {
					t.Errorf("exit after %s: %v, want 0", sig, err)
				}
			case <-time.After(10 * time.Second):
				cmd.Process.Kill()
				t.Fatalf("still running 10s after %s", sig)
			}
		})
	}
}

// TestRunAsVendor: -vendor serves that vendor's API alone, to the key of
// the variable -key-env names.
func TestRunAsVendor(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	stdout, stderr := &syncBuffer{}, &syncBuffer{}
	getenv := func(k string) string { return map[string]string{"VENDOR_KEY": "sk-test"}[k] }
	code := make(chan int, 1)
	go func() {
		code <- run(ctx, []string{"-addr", "127.0.0.1:0", "-scenario", "text", "-vendor", "anthropic", "-key-env", "VENDOR_KEY"}, getenv, stdout, stderr)
	}()
	var url string
	for deadline := time.Now().Add(10 * time.Second); url == "" && time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if m := listening.FindStringSubmatch(stdout.String()); m != nil {
			url = m[1]
			if m[2] != "scenario text, as anthropic" {
				t.Errorf("announced %q, want the scenario and the vendor", m[2])
			}
		}
	}
	if url == "" {
		t.Fatalf("no listening line; stdout %q stderr %q", stdout.String(), stderr.String())
	}
	for _, tt := range []struct {
		path, key string
		want      int
	}{
		{"/v1/messages", "sk-test", 200},
		{"/v1/messages", "sk-other", 401},
		{"/v1/chat/completions", "sk-test", 404},
	} {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, url+tt.path, strings.NewReader(`{"model":"m","max_tokens":8,"messages":[{"role":"user","content":"hi"}]}`))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("X-Api-Key", tt.key)
		req.Header.Set("Anthropic-Version", "2023-06-01")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != tt.want {
			t.Errorf("POST %s with key %s: %d, want %d", tt.path, tt.key, resp.StatusCode, tt.want)
		}
	}
	if strings.Contains(stderr.String(), "sk-test") {
		t.Errorf("the key is in the log: %s", stderr.String())
	}
	cancel()
	if c := <-code; c != 0 {
		t.Errorf("run = %d, want 0", c)
	}
}
