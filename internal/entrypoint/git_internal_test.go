package entrypoint

import "testing"

func TestRepoDir(t *testing.T) {
	tests := []struct{ repo, want string }{
		{"https://github.com/acme/app.git", "app"},
		{"https://github.com/acme/app", "app"},
		{"https://x-access-token:tok@github.com/acme/app.git/", "app"},
		{"ssh://git@gitlab.example.com:2222/group/sub/app.git", "app"},
		{"git@github.com:acme/app.git", "app"},
		{"gitlab.example.com:app.git", "app"},
		{"/srv/git/app.git", "app"},
		{"file:///srv/git/app.git", "app"},
		{"../app", "app"},
		{"https://host/", ""},
		{"https://host/.git", ""},
		{"/srv/-x.git", ""},
	}
	for _, tt := range tests {
		got, err := repoDir(tt.repo)
		if tt.want == "" {
			if err == nil {
				t.Errorf("repoDir(%q) = %q, want an error", tt.repo, got)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("repoDir(%q) = %q, %v; want %q", tt.repo, got, err, tt.want)
		}
	}
}

func TestRedactURL(t *testing.T) {
	tests := []struct{ repo, want string }{
		{"https://x-access-token:tok@github.com/acme/app.git", "https://github.com/acme/app.git"},
		{"https://tok@github.com/acme/app.git", "https://github.com/acme/app.git"},
		{"https://github.com/acme/app.git", "https://github.com/acme/app.git"},
		{"git@github.com:acme/app.git", "git@github.com:acme/app.git"},
		{"/srv/app.git", "/srv/app.git"},
	}
	for _, tt := range tests {
		if got := redactURL(tt.repo); got != tt.want {
			t.Errorf("redactURL(%q) = %q, want %q", tt.repo, got, tt.want)
		}
	}
}

func TestCloneable(t *testing.T) {
	for repo, want := range map[string]bool{
		"https://example.com/acme/app.git": true, "file:///srv/git/app": true, "/srv/git/app.git": true,
		"git@example.com:acme/app.git": true, "acme/app": false, "app": false, "acme:app": false,
	} {
		if got := cloneable(repo); got != want {
			t.Errorf("cloneable(%q) = %v, want %v", repo, got, want)
		}
	}
}
