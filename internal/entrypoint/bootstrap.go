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
	var refused secret.Secret
	var deadline <-chan time.Time // set once a token was refused
	for {
		token, err := awaitToken(ctx, file, refused, changes, deadline, poll)
		if err != nil {
			return env, err
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
		if err == nil {
			return withEnv(env, vars), nil
		}
		if !errors.Is(err, errRefused) || deadline != nil {
			return env, err
		}
		// A gateway killed after it marked the token used but before its
		// answer arrived, started again, hands the claim a new token: the
		// refusal ends the start only if none comes.
		fmt.Fprintf(env.Stderr, "berth-init: %v; waiting %s for a newer claim\n", err, refusedWait(poll))
		refused, deadline = token, time.After(refusedWait(poll))
	}
}

// errRefused marks the gateway's refusal of a bootstrap token (used,
// expired or unknown), as against its not answering.
var errRefused = errors.New("the token was refused")

// refusedWait is how long a refused token's claim waits for a newer one.
func refusedWait(poll time.Duration) time.Duration { return 20 * poll }

// awaitToken returns the token in file once there is one other than
// refused; deadline (nil: none) ends the wait with the refusal.
func awaitToken(ctx context.Context, file string, refused secret.Secret, changes <-chan struct{}, deadline <-chan time.Time, poll time.Duration) (secret.Secret, error) {
	for {
		token, err := readToken(file)
		if err != nil {
			return secret.Secret{}, err
		}
		if !token.IsZero() && (refused.IsZero() || token.Reveal() != refused.Reveal()) {
			return token, nil
		}
		select {
		case <-ctx.Done():
			return secret.Secret{}, ctx.Err()
		case <-deadline:
			return secret.Secret{}, fmt.Errorf("the gateway refused the claim's token and no newer claim came: %w", errRefused)
		case <-changes:
		case <-time.After(poll):
		}
	}
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
		if ae := (*answerError)(nil); errors.As(err, &ae) && ae.status == http.StatusUnauthorized {
			return nil, fmt.Errorf("%w: %w", errRefused, err)
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
