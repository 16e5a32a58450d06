package openssh_test

import (
	"slices"
	"strings"
	"testing"

	"berth.dev/berth/internal/openssh"
)

func TestInclude(t *testing.T) {
	const path = "/home/a/.ssh/berth/config"
	tests := []struct {
		name, config string
		added        bool
	}{
		{"empty", "", true},
		{"someone else's", "Host work\n  User a\n", true},
		{"the path", "Include /home/a/.ssh/berth/config\n", false},
		{"relative, by hand", "include berth/config\n", false},
		{"with a tilde, among others", "Include ~/.ssh/other ~/.ssh/berth/config\n", false},
		{"under a Host", "Host x\n  Include other/config\n", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, added := openssh.Include(tt.config, path)
			if added != tt.added {
				t.Fatalf("added = %v, want %v", added, tt.added)
			}
			switch {
			case !added && out != tt.config:
				t.Errorf("changed a config that includes the file:\n%s", out)
			case added && (!strings.HasPrefix(out, "# Added by berth sandbox config") || !strings.Contains(out, "\nInclude "+path+"\n\n") || !strings.HasSuffix(out, tt.config)):
				t.Errorf("want the Include at the top, the rest kept:\n%s", out)
			}
		})
	}
	if out, _ := openssh.Include("", "/home/a b/.ssh/berth/config"); !strings.Contains(out, `Include "/home/a b/.ssh/berth/config"`) {
		t.Errorf("a path with a space is not quoted:\n%s", out)
	}
}

func TestHosts(t *testing.T) {
	const here, there = "http://127.0.0.1:8080", "https://berth.example.com"
	host := func(name, url, writer string) openssh.Host {
		return openssh.Host{Alias: openssh.HostAlias(name), URL: url, ID: "sbx_" + name, Writer: writer, Proxy: openssh.ProxyCommand("/usr/bin/berth", url, name)}
	}
	file, n, _ := openssh.Hosts("", here, "usr_a", []openssh.Host{host("dev", here, "usr_a"), host("api", here, "usr_a")}, true)
	if n != 2 {
		t.Fatalf("%d entries, want 2:\n%s", n, file)
	}
	file, n, _ = openssh.Hosts(file, there, "usr_a", []openssh.Host{host("prod", there, "usr_a")}, true)
	if n != 3 {
		t.Fatalf("another gateway's run: %d entries, want 3 (the first gateway's kept):\n%s", n, file)
	}
	if !strings.Contains(file, "ProxyCommand /usr/bin/berth sandbox proxy --url https://berth.example.com prod\n  StrictHostKeyChecking") {
		t.Errorf("an https:// gateway's entry passes no fd:\n%s", file)
	}
	if !strings.Contains(file, "ProxyCommand /usr/bin/berth sandbox proxy --url http://127.0.0.1:8080 --fd-pass dev\n  ProxyUseFdpass yes\n") {
		t.Errorf("an http:// gateway's entry passes the fd:\n%s", file)
	}
	if strings.Contains(file, "IdentityFile") || strings.Contains(file, "IdentitiesOnly") {
		t.Errorf("an entry without key files names one:\n%s", file)
	}
	file, n, _ = openssh.Hosts(file, here, "usr_a", []openssh.Host{host("web", here, "usr_a")}, false)
	if n != 4 {
		t.Fatalf("adding one: %d entries, want 4:\n%s", n, file)
	}
	// Another user's run at the same gateway keeps the first user's.
	file, n, _ = openssh.Hosts(file, here, "usr_b", []openssh.Host{host("ci", here, "usr_b")}, true)
	if n != 5 || !strings.Contains(file, "Host berth-dev\n") || !strings.Contains(file, "# sandbox sbx_ci at "+here+" for usr_b\nHost berth-ci\n") {
		t.Errorf("another user's run: %d entries, want 5 (the first user's kept):\n%s", n, file)
	}
	file, n, _ = openssh.Hosts(file, here, "usr_a", []openssh.Host{host("dev", here, "usr_a")}, true)
	if n != 3 || strings.Contains(file, "Host berth-api\n") || !strings.Contains(file, "Host berth-prod\n") || !strings.Contains(file, "Host berth-ci\n") {
		t.Errorf("replacing this user's at this gateway: %d entries, want dev, prod and ci:\n%s", n, file)
	}
	// A name is one sandbox's: another's entry under it gives it up.
	other := host("dev", there, "usr_a")
	other.ID = "sbx_there"
	file, n, displaced := openssh.Hosts(file, there, "usr_a", []openssh.Host{other}, false)
	if n != 3 || strings.Count(file, "Host berth-dev\n") != 1 || !strings.Contains(file, "# sandbox sbx_there at "+there) {
		t.Errorf("an alias taken over: %d entries, want one berth-dev, sbx_there's:\n%s", n, file)
	}
	if want := []string{"berth-dev (sandbox sbx_dev at " + here + ")"}; !slices.Equal(displaced, want) {
		t.Errorf("displaced = %q, want %q", displaced, want)
	}
}

func TestHostIdentities(t *testing.T) {
	h := openssh.Host{Alias: "berth-dev", URL: "http://127.0.0.1:8080", ID: "sbx_dev", Proxy: "berth sandbox proxy dev",
		Identities: []string{"/home/a/keys/work", "/home/a/my keys/100%"}}
	file, _, _ := openssh.Hosts("", h.URL, "usr_a", []openssh.Host{h}, true)
	want := "  IdentityFile /home/a/keys/work\n  IdentityFile \"/home/a/my keys/100%%\"\n  IdentitiesOnly yes\n"
	if !strings.Contains(file, want) {
		t.Errorf("want\n%s in\n%s", want, file)
	}
	// Read back and written again by a run that does not know the keys
	// (another user's), the entry keeps them.
	again, _, _ := openssh.Hosts(file, h.URL, "usr_b", nil, true)
	if again != file {
		t.Errorf("another user's run changed the entry:\n%s", again)
	}
}

func TestProxyCommand(t *testing.T) {
	got := openssh.ProxyCommand("/opt/my tools/berth", "https://gw.example/100%", "it's")
	want := `'/opt/my tools/berth' sandbox proxy --url https://gw.example/100%% 'it'\''s'`
	if got != want {
		t.Errorf("ProxyCommand = %s, want %s", got, want)
	}
}
