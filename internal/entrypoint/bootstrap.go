package entrypoint

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"berth.dev/berth/internal/api"
	"berth.dev/berth/internal/secret"
)

// The warm-pool mode (SPEC S12). A warm pool's machine starts before
// anybody has asked for it, so it carries nothing of a sandbox's own: no
// id, key or authorized keys, only BERTH_BASE_URL and
// BERTH_BOOTSTRAP_FILE: on Kubernetes the downward-API file of the pod's
// own annotations, on podman a file the driver writes into a directory of
// the container's (warmsshd.go). Once a claim takes the machine, a
// one-time token reaches that file (a claim's annotation, key="value");
// berth-init trades the token at the gateway for the sandbox's
// environment, once, and then starts as any sandbox does.

const (
	envBootstrapFile = "BERTH_BOOTSTRAP_FILE"
	// tokenAnnotation is the pod annotation that carries the token.
	tokenAnnotation = "berth.dev/bootstrap-token"
)

// pooled reports whether berth-init starts in a pool's pod: it has the
// bootstrap file and no sandbox yet.
func pooled(getenv func(string) string) bool {
	return getenv(envBootstrapFile) != "" && getenv("BERTH_SANDBOX_ID") == ""
}

// bootstrap waits for the token, fetches the environment and returns env
// with it added (its values win).
func bootstrap(ctx context.Context, env Env, poll time.Duration) (Env, error) {
	file, base := env.Getenv(envBootstrapFile), strings.TrimSuffix(env.Getenv("BERTH_BASE_URL"), "/")
	if base == "" {
		return env, errors.New("BERTH_BASE_URL is not set: a warm pool's sandbox fetches its environment there")
	}
	fmt.Fprintf(env.Stderr, "berth-init: in the warm pool: waiting for a claim (%s)\n", file)
	// The token is noticed as it arrives where the directory can be
	// watched, and at the next poll anyway.
	changes, stop := dirChanges(filepath.Dir(file))
	defer stop()
	var token secret.Secret
	for token.IsZero() {
		var err error
		if token, err = readToken(file); err != nil {
			return env, err
		}
		if token.IsZero() {
			select {
			case <-ctx.Done():
				return env, ctx.Err()
			case <-changes:
			case <-time.After(poll):
			}
		}
	}
	if env.Getenv(envReadyFile) != "" {
		// On podman the file is the container's own: the token is used
		// once, so it goes now, and a later start waits for a new one.
		if err := os.Remove(file); err != nil {
			return env, fmt.Errorf("remove the used token: %w", err)
		}
	}
	fmt.Fprintln(env.Stderr, "berth-init: claimed: fetching the sandbox's environment")
	vars, err := fetchEnv(ctx, env, base, token, poll)
	if err != nil {
		return env, err
	}
	return withEnv(env, vars), nil
}

// readToken reads the token from a downward-API annotations file, whose
// lines are key="value" with the value quoted as Go quotes strings; none
// while there is none (or no file yet).
func readToken(path string) (secret.Secret, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return secret.Secret{}, nil
	}
	if err != nil {
		return secret.Secret{}, fmt.Errorf("read %s: %w", path, err)
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), "=")
		if !ok || k != tokenAnnotation {
			continue
		}
		if uq, err := strconv.Unquote(v); err == nil {
			v = uq
		}
		return secret.New(strings.TrimSpace(v)), nil
	}
	return secret.Secret{}, sc.Err()
}

// fetchEnv trades the token for the environment. The gateway may not
// answer at once (a rollout); a refusal is final: the token is used up or
// was never good.
func fetchEnv(ctx context.Context, env Env, base string, token secret.Secret, poll time.Duration) (map[string]string, error) {
	hc := env.HTTP
	if hc == nil {
		hc = &http.Client{Timeout: 30 * time.Second}
	}
	delay := poll
	for attempt := 1; ; attempt++ {
		vars, retry, err := fetchOnce(ctx, hc, base, token)
		if err == nil {
			return vars, nil
		}
		if !retry || attempt == 10 {
			return nil, err
		}
		fmt.Fprintf(env.Stderr, "berth-init: fetch the environment: %v; trying again\n", err)
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(delay):
		}
		delay = min(delay*2, 10*time.Second)
	}
}

func fetchOnce(ctx context.Context, hc *http.Client, base string, token secret.Secret) (map[string]string, bool, error) {
	body, again, err := gatewayCall(ctx, hc, base, token, http.MethodPost, api.BootstrapPath, "", nil)
	if err != nil {
		return nil, again, err
	}
	var out api.Environment
	if err := json.Unmarshal(body, &out); err != nil {
		return nil, false, fmt.Errorf("the gateway's answer: %w", err)
	}
	if out.Env["BERTH_SANDBOX_ID"] == "" {
		return nil, false, errors.New("the gateway's answer names no sandbox")
	}
	return out.Env, false, nil
}

// withEnv returns env with vars set over its own variables, as though the
// process had started with them.
func withEnv(env Env, vars map[string]string) Env {
	getenv, environ := env.Getenv, env.Environ
	env.Getenv = func(k string) string {
		if v, ok := vars[k]; ok {
			return v
		}
		return getenv(k)
	}
	env.Environ = func() []string {
		var out []string
		for _, kv := range environ() {
			k, _, _ := strings.Cut(kv, "=")
			if _, ok := vars[k]; !ok {
				out = append(out, kv)
			}
		}
		for k, v := range vars {
			out = append(out, k+"="+v)
		}
		slices.Sort(out)
		return out
	}
	return env
}
