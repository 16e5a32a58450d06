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

// FuzzParse: never a panic, and never an accepted address on another host.
func FuzzParse(f *testing.F) {
	for _, s := range []string{"git@github.com:acme/app.git", "ssh://git@github.com:22/a/b", "https://github.com/a/b.git",
		"a/b", "git@evil.com:a/b", "https://github.com@evil.com/a/b", "https://evil.com#@github.com/a/b", "[::1]:a/b"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, addr string) {
		r, err := forge.Parse(addr, "github.com")
		if err != nil {
			return
		}
		if r.Host != "github.com" {
			t.Fatalf("Parse(%q) accepted host %q", addr, r.Host)
		}
		lower := strings.ToLower(addr)
		if strings.Contains(lower, "://") || strings.Contains(lower, "@") {
			// An address that names a host must name github.com as its host.
			if !strings.Contains(lower, "github.com") {
				t.Fatalf("Parse(%q) accepted an address that does not name the forge", addr)
			}
		}
		if forge.CheckPath(r.Path) != nil {
			t.Fatalf("Parse(%q) returned a bad path %q", addr, r.Path)
		}
	})
}
