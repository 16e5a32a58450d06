package forge_test

import (
	"errors"
	"strings"
	"testing"

	"berth.dev/berth/internal/forge"
)

func TestParse(t *testing.T) {
	tests := []struct {
		addr, host string
		want       forge.Repo
		err        error
	}{
		{"git@github.com:acme/app.git", "github.com", forge.Repo{Host: "github.com", Path: "acme/app"}, nil},
		{"ssh://git@github.com/acme/app.git", "github.com", forge.Repo{Host: "github.com", Path: "acme/app"}, nil},
		{"ssh://git@GitHub.com:22/acme/app", "github.com", forge.Repo{Host: "github.com", Path: "acme/app"}, nil},
		{"https://github.com/acme/app", "github.com", forge.Repo{Host: "github.com", Path: "acme/app"}, nil},
		{"https://github.com/acme/app.git/", "github.com", forge.Repo{Host: "github.com", Path: "acme/app"}, nil},
		{"acme/app", "github.com", forge.Repo{Host: "github.com", Path: "acme/app"}, nil},
		{"git@gitlab.example.com:group/sub/app.git", "gitlab.example.com", forge.Repo{Host: "gitlab.example.com", Path: "group/sub/app"}, nil},
		{"acme/app", "", forge.Repo{Path: "acme/app"}, nil},
		{"http://127.0.0.1:8080/acme/app", "127.0.0.1:8080", forge.Repo{Host: "127.0.0.1:8080", Path: "acme/app"}, nil},
		{"git@ghe.example:acme/app", "ghe.example:8443", forge.Repo{Host: "ghe.example:8443", Path: "acme/app"}, nil},
		{"https://ghe.example/acme/app", "ghe.example:8443", forge.Repo{Host: "ghe.example:8443", Path: "acme/app"}, nil},
		{"https://ghe.example:9999/acme/app", "ghe.example:8443", forge.Repo{}, forge.ErrOtherHost},
		{"https://github.com:443/acme/app", "github.com", forge.Repo{Host: "github.com", Path: "acme/app"}, nil},
		{"https://github.com:8443/acme/app", "github.com", forge.Repo{}, forge.ErrOtherHost},
		{"app", "", forge.Repo{Path: "app"}, nil},

		{"git@gitlab.com:acme/app.git", "github.com", forge.Repo{}, forge.ErrOtherHost},
		{"https://github.com.evil.example/acme/app", "github.com", forge.Repo{}, forge.ErrOtherHost},
		{"https://github.com/acme/app", "", forge.Repo{}, forge.ErrOtherHost},
		{"https://user:secret@github.com/acme/app", "github.com", forge.Repo{}, forge.ErrBadAddress},
		{"ftp://github.com/acme/app", "github.com", forge.Repo{}, forge.ErrBadAddress},
		{"file:///srv/git/app", "", forge.Repo{}, forge.ErrBadAddress},
		{"/srv/git/app", "", forge.Repo{}, forge.ErrBadAddress},
		{"acme/../etc", "", forge.Repo{}, forge.ErrBadAddress},
		{"app", "github.com", forge.Repo{}, forge.ErrBadAddress},
		{"acme/app?x=1", "github.com", forge.Repo{}, forge.ErrBadAddress},
		{"", "github.com", forge.Repo{}, forge.ErrBadAddress},
		{"acme//app", "", forge.Repo{}, forge.ErrBadAddress},
		{"-x/app", "", forge.Repo{}, forge.ErrBadAddress},
	}
	for _, tt := range tests {
		got, err := forge.Parse(tt.addr, tt.host)
		if !errors.Is(err, tt.err) || got != tt.want {
			t.Errorf("Parse(%q, %q) = %+v, %v; want %+v, %v", tt.addr, tt.host, got, err, tt.want, tt.err)
		}
	}
}

// FuzzParse feeds Parse arbitrary addresses against forges of several
// kinds (the forge's host is the operator's setting, not input). It never panics; it refuses with ErrBadAddress or ErrOtherHost;
// it never takes an address that names another host; and what it takes
// is a normalised repository: a path CheckPath takes, with no "." or ".."
// element, the forge's host in lower case, that reads back the same from
// its path alone and, on a remote forge, from its https address.
func FuzzParse(f *testing.F) {
	hosts := []string{"github.com", "", "ghe.example:8443", "127.0.0.1:8080", "GitLab.Example.com", "[::1]:3000"}
	for _, s := range []string{
		"git@github.com:acme/app.git", "ssh://git@GitHub.com:22/acme/app", "https://github.com/acme/app.git/",
		"acme/app", "app", "http://127.0.0.1:8080/acme/app", "https://ghe.example:9999/acme/app",
		"https://user:secret@github.com/acme/app", "https://user@github.com/acme/app", "file:///srv/git/app", "/srv/git/app",
		"acme/../etc", "acme/./app", "acme//app", ".git", "acme/.git", "acme/app.git.git", "git@[::1]:acme/app",
		"https://[::1]:8443/acme/app", "https://github.com/acme/app?x=1", "https://github.com/acme/app#x", "https://github.com./acme/app",
		"git@github.com://acme/app", "https:/github.com/acme/app", "HTTPS://GITHUB.COM/ACME/APP", "acme/app\x00",
		"https://github.com/%61cme/app", "https://github.com/acme%2Fapp", "a/b/c/d/e/f/g/h/i", "git@github.com:acme/app:x",
		"ssh://git@github.com:22/a/b", "git@evil.com:a/b", "https://github.com@evil.com/a/b", "https://evil.com#@github.com/a/b", "[::1]:a/b",
	} {
		for i := range hosts {
			f.Add(s, uint8(i))
		}
	}
	f.Fuzz(func(t *testing.T, addr string, which uint8) {
		host := hosts[int(which)%len(hosts)]
		repo, err := forge.Parse(addr, host)
		if err != nil {
			if !errors.Is(err, forge.ErrBadAddress) && !errors.Is(err, forge.ErrOtherHost) {
				t.Fatalf("Parse(%q, %q): %v, neither ErrBadAddress nor ErrOtherHost", addr, host, err)
			}
			return
		}
		if err := forge.CheckPath(repo.Path); err != nil {
			t.Fatalf("Parse(%q, %q) = %+v, whose path CheckPath refuses: %v", addr, host, repo, err)
		}
		for _, seg := range strings.Split(repo.Path, "/") {
			if seg == "." || seg == ".." || seg == "" {
				t.Fatalf("Parse(%q, %q) = %+v, with a path element %q", addr, host, repo, seg)
			}
		}
		if repo.Host != strings.ToLower(host) {
			t.Fatalf("Parse(%q, %q) = %+v: the host is not the forge's", addr, host, repo)
		}
		if h, _, _ := strings.Cut(strings.ToLower(host), ":"); h != "" && (strings.Contains(addr, "://") || strings.Contains(addr, "@")) &&
			!strings.Contains(strings.ToLower(addr), h) {
			t.Fatalf("Parse(%q, %q) took an address that does not name the forge", addr, host)
		}
		if back, err := forge.Parse(repo.Path, host); err != nil || back != repo {
			t.Fatalf("Parse(%q, %q) = %+v, but its path reads as %+v, %v", addr, host, repo, back, err)
		}
		if host != "" {
			if back, err := forge.Parse("https://"+host+"/"+repo.Path, host); err != nil || back != repo {
				t.Fatalf("Parse(%q, %q) = %+v, but its https address reads as %+v, %v", addr, host, repo, back, err)
			}
		}
	})
}
