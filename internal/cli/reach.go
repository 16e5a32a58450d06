package cli

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strings"
	"syscall"
	"time"

	"berth.dev/berth/internal/api"
	"berth.dev/berth/internal/client"
)

// gatewayAddress checks a gateway's address as --url, BERTH_URL or the
// login file gives it. One without a scheme is taken as http:// when it
// names this machine (localhost, 127.0.0.1, ::1), as curl does; any other
// host needs its scheme said, since guessing http would send a key in the
// clear to a gateway that wants https.
func gatewayAddress(raw string) (string, error) {
	u := strings.TrimSuffix(strings.TrimSpace(raw), "/")
	if strings.Contains(u, "://") {
		p, err := url.Parse(u)
		if err != nil || p.Host == "" || (p.Scheme != "http" && p.Scheme != "https") {
			return "", usageError{fmt.Errorf("gateway address %q: want http://HOST:PORT or https://HOST (--url, BERTH_URL or the login file)", raw)}
		}
		return u, nil
	}
	host := u
	if h, _, err := net.SplitHostPort(u); err == nil {
		host = h
	}
	switch strings.Trim(host, "[]") {
	case "localhost", "127.0.0.1", "::1":
		return "http://" + u, nil
	}
	return "", usageError{fmt.Errorf("gateway address %q has no scheme: write https://%s (or http://%s for a gateway without TLS) in --url or BERTH_URL", raw, u, u)}
}

// describeUnreachable words an error that never reached a gateway: which
// address was tried, what the network said, and what to check. ok is false
// for any other error.
func describeUnreachable(err error) (msg string, ok bool) {
	var ue *url.Error
	if !errors.As(err, &ue) || ue.Timeout() && !isDial(err) {
		return "", false
	}
	var why string
	var dns *net.DNSError
	switch {
	case errors.Is(err, syscall.ECONNREFUSED):
		why = "nothing listens there (connection refused)"
	case errors.As(err, &dns):
		why = fmt.Sprintf("the name %s does not resolve", dns.Name)
	case isDial(err):
		why = "it does not answer (" + rootCause(err) + ")"
	default:
		return "", false
	}
	base := ue.URL
	if p, perr := url.Parse(ue.URL); perr == nil {
		base = p.Scheme + "://" + p.Host
	}
	return fmt.Sprintf("cannot reach the gateway at %s: %s\n"+
		"(is berth serve running there? The address comes from --url, else BERTH_URL, else the file berth login wrote)", base, why), true
}

func isDial(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial"
}

// rootCause is the innermost error's text: "i/o timeout", not the
// request it was part of.
func rootCause(err error) string {
	for {
		next := errors.Unwrap(err)
		if next == nil {
			return err.Error()
		}
		err = next
	}
}

// alreadyTerminated says so, and reports true, when the sandbox ref names
// has been terminated before: terminate succeeds then, as the gateway's
// does (it changes nothing), and scripts need not look first. Any error
// is left to the terminate that follows to report.
func alreadyTerminated(ctx context.Context, env Env, c *client.Client, ref string) bool {
	sb, err := c.Sandbox(ctx, ref)
	if err != nil || sb.State != api.StateTerminated {
		return false
	}
	ended := ""
	if sb.EndedAt != nil {
		ended = " (ended " + sb.EndedAt.Local().Format(time.RFC3339) + ", " + until(env.Now(), *sb.EndedAt) + ")"
	}
	fmt.Fprintf(env.Stdout, "sandbox %s was already terminated%s\n", sb.Name, ended)
	return true
}

// warnCut says on stderr when the gateway cut the lifetime asked for.
func warnCut(env Env, sb api.Sandbox) {
	if sb.LifetimeCut != "" {
		fmt.Fprintf(env.Stderr, "warning: %s: %s\n", sb.Name, sb.LifetimeCut)
	}
}
