package entrypoint

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"berth.dev/berth/internal/api"
	"berth.dev/berth/internal/secret"
)

// credentialHelperName is the name berth-init answers to as git's credential
// helper (a symlink to it in the image).
const credentialHelperName = "git-credential-berth"

// refreshBefore is how long before its expiry a token is replaced (SPEC S9).
const refreshBefore = 5 * time.Minute

// cachedToken is the current repository token, kept in
// ~/.config/berth/git-credential.json (mode 0600).
type cachedToken struct {
	Username  string
	Token     secret.Secret
	ExpiresAt time.Time
}

// decodeToken reads a token as the gateway answers it (api.GitCredential)
// and the cache file keeps it: the value in the clear, on purpose, and
// only there. One without a value is refused.
func decodeToken(r io.Reader) (cachedToken, bool) {
	var f api.GitCredential
	if err := json.NewDecoder(io.LimitReader(r, 64<<10)).Decode(&f); err != nil || f.Token == "" {
		return cachedToken{}, false
	}
	return cachedToken{Username: f.Username, Token: secret.New(f.Token), ExpiresAt: f.ExpiresAt}, true
}

func tokenCachePath(home string) string {
	return filepath.Join(home, ".config", "berth", "git-credential.json")
}

// credentialMain is git-credential-berth (SPEC S9). Git calls it for the
// sandbox's repository only (berth-init configures it for that URL), and it
// answers only for that repository's host, so a submodule elsewhere never
// sees the credential:
//   - gateway mode: the sandbox's own key, which the gateway's git endpoint
//     takes as the password;
//   - token mode: the current forge token, replaced through
//     BERTH_GIT_CREDENTIAL_URL once it has less than five minutes left.
//
// "store" and "erase" change nothing: berth owns the credential.
func credentialMain(args []string, env Env) int {
	if len(args) == 0 || args[0] != "get" {
		return 0
	}
	req := readCredentialRequest(env.Stdin)
	repo, err := url.Parse(env.Getenv("BERTH_REPO"))
	if err != nil || repo.Host == "" {
		return 0 // no repository: nothing to answer for
	}
	if !strings.EqualFold(req["protocol"], repo.Scheme) || !strings.EqualFold(req["host"], repo.Host) {
		return 0 // not our repository's host: let git ask elsewhere
	}
	switch env.Getenv("BERTH_GIT_MODE") {
	case "token":
		t, err := currentToken(env, time.Now())
		if err != nil {
			fmt.Fprintf(env.Stderr, "git-credential-berth: %v\n", err)
			return exitFailure
		}
		fmt.Fprintf(env.Stdout, "username=%s\npassword=%s\n", t.Username, t.Token.Reveal())
	default:
		key := env.Getenv("BERTH_API_KEY")
		if key == "" {
			fmt.Fprintln(env.Stderr, "git-credential-berth: BERTH_API_KEY is not set")
			return exitFailure
		}
		fmt.Fprintf(env.Stdout, "username=berth\npassword=%s\n", key)
	}
	return 0
}

// readCredentialRequest reads git's key=value lines up to a blank line.
func readCredentialRequest(r io.Reader) map[string]string {
	req := map[string]string{}
	if r == nil {
		return req
	}
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		line := sc.Text()
		if line == "" {
			break
		}
		if k, v, ok := strings.Cut(line, "="); ok {
			req[k] = v
		}
	}
	return req
}

// currentToken returns the cached token, replacing it first when it has
// less than five minutes left. A refresh that fails while the cached token
// still works is not fatal.
func currentToken(env Env, now time.Time) (cachedToken, error) {
	home := env.Getenv("HOME")
	t, err := readTokenCache(home)
	if err == nil && now.Add(refreshBefore).Before(t.ExpiresAt) {
		return t, nil
	}
	fresh, ferr := fetchToken(env)
	if ferr != nil {
		if err == nil && now.Before(t.ExpiresAt) {
			return t, nil
		}
		return cachedToken{}, ferr
	}
	if err := writeTokenCache(home, fresh); err != nil {
		return cachedToken{}, err
	}
	return fresh, nil
}

// fetchToken asks the gateway for a new token with the sandbox's own key.
func fetchToken(env Env) (cachedToken, error) {
	u, key := env.Getenv("BERTH_GIT_CREDENTIAL_URL"), env.Getenv("BERTH_API_KEY")
	if u == "" || key == "" {
		return cachedToken{}, errors.New("no token and no way to get one (BERTH_GIT_CREDENTIAL_URL and BERTH_API_KEY are needed)")
	}
	req, err := http.NewRequest(http.MethodPost, u, nil)
	if err != nil {
		return cachedToken{}, err
	}
	req.Header.Set("Authorization", "Bearer "+key)
	hc := env.HTTP
	if hc == nil {
		hc = &http.Client{Timeout: 30 * time.Second}
	}
	resp, err := hc.Do(req)
	if err != nil {
		return cachedToken{}, fmt.Errorf("refresh the repository token: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		var e api.Error
		_ = json.NewDecoder(io.LimitReader(resp.Body, 64<<10)).Decode(&e)
		return cachedToken{}, fmt.Errorf("refresh the repository token: %s %s: %s", resp.Status, e.Code, e.Message)
	}
	t, ok := decodeToken(resp.Body)
	if !ok {
		return cachedToken{}, fmt.Errorf("refresh the repository token: unexpected answer")
	}
	return t, nil
}

func readTokenCache(home string) (cachedToken, error) {
	f, err := os.Open(tokenCachePath(home))
	if err != nil {
		return cachedToken{}, err
	}
	defer f.Close()
	t, ok := decodeToken(f)
	if !ok {
		return cachedToken{}, errors.New("unreadable token cache")
	}
	return t, nil
}

func writeTokenCache(home string, t cachedToken) error {
	path := tokenCachePath(home)
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	b, err := json.Marshal(api.GitCredential{Username: t.Username, Token: t.Token.Reveal(), ExpiresAt: t.ExpiresAt})
	if err != nil {
		return err
	}
	return writeFile(path, b, 0o600)
}

// seedTokenCache keeps the token the gateway handed at start (token mode),
// unless the cache already holds a newer one (a plain resume restarts the
// container with the environment it was created with).
func (r *starter) seedTokenCache() error {
	tok := r.env.Getenv("BERTH_GIT_TOKEN")
	if r.env.Getenv("BERTH_GIT_MODE") != "token" || tok == "" {
		return nil
	}
	secs, _ := strconv.ParseInt(r.env.Getenv("BERTH_GIT_TOKEN_EXPIRES"), 10, 64)
	t := cachedToken{Username: r.env.Getenv("BERTH_GIT_USERNAME"), Token: secret.New(tok), ExpiresAt: time.Unix(secs, 0).UTC()}
	if old, err := readTokenCache(r.cfg.home); err == nil && !old.ExpiresAt.Before(t.ExpiresAt) {
		return nil
	}
	return writeTokenCache(r.cfg.home, t)
}

// credentialURL is the part of a clone address git matches credential
// settings on: scheme://host[:port].
func credentialURL(repo string) (string, bool) {
	u, err := url.Parse(repo)
	if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
		return "", false
	}
	return u.Scheme + "://" + u.Host, true
}
