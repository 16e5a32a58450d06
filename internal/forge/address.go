package forge

import (
	"fmt"
	"net"
	"net/url"
	"strings"
)

// Parse reads a repository address as people give one and names the
// repository on the forge at host ("" for the local forge). Accepted forms
// (SPEC S9), all cloned over HTTPS in the end:
//
//	git@host:group/app.git       scp-like ssh
//	ssh://git@host[:port]/group/app.git
//	https://host/group/app[.git]
//	group/app                    a path on the forge itself
//
// An address on another host than the forge's is refused (ErrOtherHost),
// as is anything that is not a repository address (ErrBadAddress).
func Parse(addr, host string) (Repo, error) {
	addr = strings.TrimSpace(addr)
	if addr == "" || len(addr) > 500 || strings.ContainsAny(addr, " \t\r\n\x00\\?#") {
		return Repo{}, fmt.Errorf("%q: %w", addr, ErrBadAddress)
	}
	gotHost, gotPort, path, err := split(addr)
	if err != nil {
		return Repo{}, err
	}
	if gotHost != "" && !sameHost(gotHost, gotPort, host) {
		if host == "" {
			return Repo{}, fmt.Errorf("%s is on %s, but this deployment's forge is the local one (name the repository as berth repo list shows it): %w", addr, gotHost, ErrOtherHost)
		}
		return Repo{}, fmt.Errorf("%s is on %s, not on this deployment's forge %s: %w", addr, gotHost, host, ErrOtherHost)
	}
	path = strings.TrimSuffix(strings.Trim(path, "/"), ".git")
	if err := CheckPath(path); err != nil {
		return Repo{}, err
	}
	if strings.HasSuffix(path, ".git") {
		// app.git.git would be a repository app.git, which neither GitHub
		// nor GitLab allows, and which the ".git" trimmed once more (by
		// allowed_repos, say) would take for app.
		return Repo{}, fmt.Errorf("%q: a repository's name does not end in .git: %w", addr, ErrBadAddress)
	}
	if host != "" && !strings.Contains(path, "/") {
		return Repo{}, fmt.Errorf("%q: a repository on %s is owner/name: %w", addr, host, ErrBadAddress)
	}
	return Repo{Host: strings.ToLower(host), Path: path}, nil
}

// CheckRemote refuses, for the remote forge at host, what Parse refuses of
// a repository that did not come through it: a repository on another host
// (ErrOtherHost), a path that is not one, or of one element
// (ErrBadAddress).
func CheckRemote(r Repo, host string) error {
	if r.Host != "" && !strings.EqualFold(r.Host, host) {
		return fmt.Errorf("%s is not on %s: %w", r, host, ErrOtherHost)
	}
	if err := CheckPath(r.Path); err != nil {
		return err
	}
	if !strings.Contains(r.Path, "/") {
		return fmt.Errorf("%q: a repository on %s is owner/name: %w", r.Path, host, ErrBadAddress)
	}
	return nil
}

// split takes an address apart into its host ("" for a bare path), the
// port an http(s) address names ("" for ssh, which never names the forge's
// web port), and its path.
func split(addr string) (host, port, path string, err error) {
	bad := func() (string, string, string, error) { return "", "", "", fmt.Errorf("%q: %w", addr, ErrBadAddress) }
	if scheme, rest, ok := strings.Cut(addr, "://"); ok {
		switch strings.ToLower(scheme) {
		case "https", "http", "ssh", "git+ssh":
		default:
			return bad()
		}
		u, err := url.Parse(strings.ToLower(scheme) + "://" + rest)
		if err != nil || u.Host == "" || u.Opaque != "" || u.RawQuery != "" || u.Fragment != "" {
			return bad()
		}
		if u.User != nil {
			if _, hasPassword := u.User.Password(); hasPassword {
				// A credential in an address is never accepted: it would be
				// stored and shown.
				return bad()
			}
		}
		h := u.Hostname()
		if h == "" || !hostOK(h) {
			return bad()
		}
		port := ""
		if u.Scheme == "http" || u.Scheme == "https" {
			port = u.Port()
			if (u.Scheme == "https" && port == "443") || (u.Scheme == "http" && port == "80") {
				port = ""
			}
		}
		return h, port, u.Path, nil
	}
	// scp-like: [user@]host:path, where host has no slash before the colon.
	if i := strings.IndexByte(addr, ':'); i > 0 && !strings.Contains(addr[:i], "/") {
		userHost, path := addr[:i], addr[i+1:]
		h := userHost
		if at := strings.LastIndexByte(userHost, '@'); at >= 0 {
			h = userHost[at+1:]
		}
		if h == "" || !hostOK(h) || strings.HasPrefix(path, "//") {
			return bad()
		}
		return h, "", path, nil
	}
	if strings.HasPrefix(addr, "/") || strings.Contains(addr, "@") || strings.Contains(addr, ":") {
		return bad()
	}
	return "", "", addr, nil
}

// hostOK accepts a DNS name or an IP address.
func hostOK(h string) bool {
	if net.ParseIP(strings.Trim(h, "[]")) != nil {
		return true
	}
	if len(h) > 253 {
		return false
	}
	for _, label := range strings.Split(h, ".") {
		if label == "" || len(label) > 63 {
			return false
		}
		for _, c := range label {
			if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-') {
				return false
			}
		}
	}
	return true
}

// sameHost reports whether an address's host (and, for http(s), port)
// names the forge at forgeHost, which may carry a port (a GitHub Enterprise
// Server on :8443, a test's stand-in). An http(s) address must then name
// that port; an ssh address names the host only.
func sameHost(host, port, forgeHost string) bool {
	if forgeHost == "" {
		return false
	}
	fh, fp := forgeHost, ""
	if h, p, err := net.SplitHostPort(forgeHost); err == nil {
		fh, fp = h, p
	}
	if !strings.EqualFold(strings.TrimSuffix(host, "."), strings.TrimSuffix(fh, ".")) {
		return false
	}
	return port == "" || port == fp
}
