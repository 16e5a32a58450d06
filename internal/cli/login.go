package cli

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"berth.dev/berth/internal/account"
	"berth.dev/berth/internal/api"
	"berth.dev/berth/internal/client"
)

// defaultURL is where the CLI looks for a gateway when nothing says.
const defaultURL = "http://localhost:8080"

// globals are the flags and surroundings every client command shares.
type globals struct {
	env Env
	url string
}

// loginFile is what `berth login` writes: the gateway and a key for it.
type loginFile struct {
	URL string `json:"url"`
	Key string `json:"key"`
}

// configPath is $BERTH_CONFIG, else $XDG_CONFIG_HOME/berth/config.json,
// else ~/.config/berth/config.json.
func (g *globals) configPath() (string, error) {
	if p := g.env.Getenv("BERTH_CONFIG"); p != "" {
		return p, nil
	}
	if x := g.env.Getenv("XDG_CONFIG_HOME"); x != "" {
		return filepath.Join(x, "berth", "config.json"), nil
	}
	home := g.env.Getenv("HOME")
	if home == "" {
		return "", errors.New("cannot find the login file: HOME is unset (set BERTH_CONFIG)")
	}
	return filepath.Join(home, ".config", "berth", "config.json"), nil
}

func (g *globals) readLogin() (loginFile, error) {
	var lf loginFile
	path, err := g.configPath()
	if err != nil {
		return lf, nil
	}
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return lf, nil
	}
	if err != nil {
		return lf, fmt.Errorf("read login file: %w", err)
	}
	if err := json.Unmarshal(b, &lf); err != nil {
		return lf, fmt.Errorf("login file %s is not valid JSON: %w", path, err)
	}
	return lf, nil
}

// gatewayURL is --url, else $BERTH_URL, else the login file's, else the
// default, checked by gatewayAddress.
func (g *globals) gatewayURL(lf loginFile) (string, error) {
	for _, u := range []string{g.url, g.env.Getenv("BERTH_URL"), lf.URL} {
		if u != "" {
			return gatewayAddress(u)
		}
	}
	return defaultURL, nil
}

// client returns a client for the gateway, authenticated with $BERTH_API_KEY
// or the login file's key.
func (g *globals) client() (*client.Client, error) {
	c, _, err := g.clientAndURL()
	return c, err
}

// clientAndURL is client, with the gateway's address it uses.
func (g *globals) clientAndURL() (*client.Client, string, error) {
	lf, err := g.readLogin()
	if err != nil {
		return nil, "", err
	}
	key := g.env.Getenv("BERTH_API_KEY")
	if key == "" {
		key = lf.Key
	}
	url, err := g.gatewayURL(lf)
	if err != nil {
		return nil, "", err
	}
	warn := func(msg string) { fmt.Fprintln(g.env.Stderr, "warning: "+msg) }
	return client.New(url, key, g.env.HTTP).WithWarnings(warn), url, nil
}

// listClient is client for a list command given --limit n: its lists stop
// after n entries (0: every one).
func (g *globals) listClient(n int) (*client.Client, error) {
	c, err := g.client()
	if err != nil {
		return nil, err
	}
	return limited(c, n)
}

// limited is c with its lists stopped after n entries (--limit; 0: every
// one).
func limited(c *client.Client, n int) (*client.Client, error) {
	if n < 0 {
		return nil, fmt.Errorf("--limit %d: give how many entries to show, 1 or more (leave it out for every one)", n)
	}
	return c.WithLimit(n), nil
}

func newLoginCmd(g *globals) *cobra.Command {
	var invitation, sso, device, noBrowser bool
	var keyName, org string
	cmd := &cobra.Command{
		Use:   "login",
		Short: "Save a gateway address and key for later commands (or get your key with an invitation or your identity provider)",
		Long: `Save a gateway address and key for later commands.

The key is read from $BERTH_API_KEY or, when unset, from the first line of
standard input, never from the command line, so it stays out of shell
history and process listings. It is checked against the gateway, then
written with the address to $BERTH_CONFIG (default ~/.config/berth/config.json)
with mode 0600.

With --invitation, what is read is the one-time invitation your
administrator gave you ($BERTH_INVITATION or, when unset, the first line of
standard input; never the command line). The gateway exchanges it for a
new key of your own, which is saved as above: nobody else ever sees it. An
invitation works once. If it was used already, login fails saying when:
if that was not you, someone else may hold a key as you, so tell your
administrator at once.

With --sso, you sign in through your organisation's identity provider
instead, in a browser, and nothing is read from standard input: berth
prints an address to open, and opens it unless --no-browser ($BROWSER,
else xdg-open or open).
The gateway signs you in with the provider, then sends the browser back
to a port berth listens on at 127.0.0.1, so the browser must run on this
machine. berth trades what comes back for a new key of your own, saved
as above, and says when it expires (12h unless the gateway is set
otherwise; sooner if the provider stops letting you in): sign in again
then. When your groups give you several organisations, --org names the
one (else the browser asks). berth waits at most 5 minutes; Ctrl-C stops
it. A gateway without an identity provider says so.

With --sso --device, for a terminal no browser can reach back (an ssh
session on another machine), berth opens nothing and listens on no
port: it prints the address of the gateway's sign-in page and a code
like BCDF-GHJK. Open the page in a browser on any machine, enter the
code (or open the second address printed, which holds it), check that
the page shows the same code, and sign in there. Meanwhile berth asks
the gateway every few seconds whether you have; then it saves your new
key as --sso does. It stops when the code expires (it says when: 10
minutes as the gateway is shipped) or on Ctrl-C. --no-browser is
accepted and changes nothing: --device never starts a browser.`,
		Example: `  berth admin bootstrap -o json | jq -r .key.secret | berth login --url http://localhost:8080
  BERTH_API_KEY=berth_… berth login --url https://berth.example.com
  berth login --invitation --url https://berth.example.com    # paste the invitation, then Enter
  berth login --sso --url https://berth.example.com
  berth login --sso --org acme --no-browser                  # open the printed address yourself
  berth login --sso --device --url https://berth.example.com  # over ssh: sign in from a browser anywhere with a code`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if sso {
				switch {
				case invitation:
					return usageError{errors.New("login: --sso and --invitation: choose one (--sso signs you in through the identity provider)")}
				case g.env.Getenv("BERTH_API_KEY") != "":
					return usageError{errors.New("login --sso: BERTH_API_KEY is set, but --sso reads no key: unset it, or leave out --sso to save that key")}
				case g.stdinHolds():
					return usageError{errors.New("login --sso reads no key, but standard input holds one: leave out --sso to save that key")}
				}
				return g.loginSSO(cmd.Context(), ssoLogin{org: org, keyName: keyName, noBrowser: noBrowser, device: device})
			}
			for _, f := range []string{"device", "org", "no-browser"} {
				if cmd.Flags().Changed(f) {
					return usageError{fmt.Errorf("login: --%s is for signing in through the identity provider: add --sso", f)}
				}
			}
			if invitation {
				return g.enroll(cmd, keyName)
			}
			key := g.env.Getenv("BERTH_API_KEY")
			if key == "" {
				var err error
				if key, err = g.firstLine("login: no key: set BERTH_API_KEY or pass the key on standard input"); err != nil {
					return err
				}
			}
			if account.LooksLikeInvitation(key) {
				return usageError{errors.New("login: that is an invitation, not a key: exchange it for your key with berth login --invitation")}
			}
			url, err := g.loginURL()
			if err != nil {
				return err
			}
			who, err := client.New(url, key, g.env.HTTP).Whoami(cmd.Context())
			if ae, ok := errors.AsType[*api.Error](err); ok && ae.Code == api.CodeUnauthenticated {
				// Not describe's hint: "run berth login" is what failed.
				return fmt.Errorf("login to %s: the gateway refused this key (%s); nothing was saved", url, ae.Message)
			}
			if err != nil {
				return fmt.Errorf("login to %s: %w", url, err)
			}
			path, err := g.configPath()
			if err != nil {
				return err
			}
			if err := writeLogin(path, loginFile{URL: url, Key: key}); err != nil {
				return err
			}
			fmt.Fprintf(g.env.Stdout, "logged in to %s as %s (%s of %s); saved in %s\n",
				url, who.User.Name, who.User.Role, who.Organisation.Name, path)
			return nil
		},
	}
	cmd.Flags().BoolVar(&invitation, "invitation", false, "exchange a one-time invitation ($BERTH_INVITATION or standard input) for your own key, and save that")
	cmd.Flags().BoolVar(&sso, "sso", false, "sign in through the identity provider, in a browser, for a key of your own that expires, and save that")
	cmd.Flags().BoolVar(&device, "device", false, "with --sso: sign in from a browser on any machine, with a code berth prints (for ssh sessions)")
	cmd.Flags().StringVar(&org, "org", "", "with --sso: the organisation to sign in to, when your groups give you several")
	cmd.Flags().BoolVar(&noBrowser, "no-browser", false, "with --sso: only print the address to open, start no browser (--device never starts one)")
	cmd.Flags().StringVar(&keyName, "key-name", "", `with --invitation or --sso: a name for the new key (default "enrolled"; with --sso "sso " and this machine's host name)`)
	return cmd
}

// enroll is "berth login --invitation": the invitation is exchanged for a
// key of the user's own, which is saved. Where it is saved is settled
// first: an invitation works once, and a key that cannot be saved is lost.
func (g *globals) enroll(cmd *cobra.Command, keyName string) error {
	inv := g.env.Getenv("BERTH_INVITATION")
	if inv == "" {
		var err error
		if inv, err = g.firstLine("login: no invitation: set BERTH_INVITATION or pass the invitation on standard input"); err != nil {
			return err
		}
	}
	path, err := g.configPath()
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return fmt.Errorf("login: the login file cannot be written, so the invitation was not used: %w", err)
	}
	url, err := g.loginURL()
	if err != nil {
		return err
	}
	e, err := client.New(url, "", g.env.HTTP).Redeem(cmd.Context(), api.RedeemInvitation{Invitation: inv, KeyName: keyName})
	if ae, ok := errors.AsType[*api.Error](err); ok && (ae.Code == api.CodeUnauthenticated || ae.Code == api.CodeConflict) {
		return fmt.Errorf("login to %s: the gateway refused the invitation: %s\nNothing was saved", url, ae.Message)
	}
	if err != nil {
		return fmt.Errorf("login to %s: %w", url, err)
	}
	if err := writeLogin(path, loginFile{URL: url, Key: e.Key.Secret}); err != nil {
		// The key exists but nobody has it: say which, so it can be revoked.
		return fmt.Errorf("login: your new key %s could not be saved (revoke it with berth key revoke %s once you have another): %w",
			e.Key.ID, e.Key.ID, err)
	}
	fmt.Fprintf(g.env.Stdout, "logged in to %s as %s (%s of %s) with your new key %s; saved in %s\n",
		url, e.User.Name, e.User.Role, e.Organisation.Name, e.Key.ID, path)
	return nil
}

// firstLine reads the first line of standard input, trimmed; empty input
// is a usage mistake worded by missing.
func (g *globals) firstLine(missing string) (string, error) {
	line, err := bufio.NewReader(g.env.Stdin).ReadString('\n')
	if err != nil && line == "" {
		return "", usageError{errors.New(missing)}
	}
	return strings.TrimSpace(line), nil
}

// loginURL is the gateway's address login uses. A broken login file is
// what login replaces: only its address was wanted, and --url or
// BERTH_URL can give it.
func (g *globals) loginURL() (string, error) {
	lf, err := g.readLogin()
	if err != nil {
		fmt.Fprintf(g.env.Stderr, "warning: %v; login replaces it\n", err)
		lf = loginFile{}
	}
	return g.gatewayURL(lf)
}

// writeLogin writes the login file readable by its owner only, replacing
// any earlier one atomically.
func writeLogin(path string, lf loginFile) error {
	if err := writePrivateJSON(path, lf); err != nil {
		return fmt.Errorf("write login file: %w", err)
	}
	return nil
}

// writePrivateJSON writes v as JSON to path, readable by its owner only,
// in a directory of theirs, replacing any earlier file atomically.
func writePrivateJSON(path string, v any) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	return writeAtomic(path, append(b, '\n'), 0o600)
}
