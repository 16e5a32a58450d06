package openssh_test

import (
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
	host := func(name, url string) openssh.Host {
		return openssh.Host{Alias: openssh.HostAlias(name), URL: url, ID: "sbx_" + name, Proxy: openssh.ProxyCommand("/usr/bin/berth", url, name)}
	}
	file, n := openssh.Hosts("", here, []openssh.Host{host("dev", here), host("api", here)}, true)
	if n != 2 {
		t.Fatalf("%d entries, want 2:\n%s", n, file)
	}
	file, n = openssh.Hosts(file, there, []openssh.Host{host("prod", there)}, true)
	if n != 3 {
		t.Fatalf("another gateway's run: %d entries, want 3 (the first gateway's kept):\n%s", n, file)
	}
	if !strings.Contains(file, "ProxyCommand /usr/bin/berth sandbox proxy --url https://berth.example.com prod\n  StrictHostKeyChecking") {
		t.Errorf("an https:// gateway's entry passes no fd:\n%s", file)
	}
	if !strings.Contains(file, "ProxyCommand /usr/bin/berth sandbox proxy --url http://127.0.0.1:8080 --fd-pass dev\n  ProxyUseFdpass yes\n") {
		t.Errorf("an http:// gateway's entry passes the fd:\n%s", file)
	}
	file, n = openssh.Hosts(file, here, []openssh.Host{host("web", here)}, false)
	if n != 4 {
		t.Fatalf("adding one: %d entries, want 4:\n%s", n, file)
	}
	file, n = openssh.Hosts(file, here, []openssh.Host{host("dev", here)}, true)
	if n != 2 || strings.Contains(file, "Host berth-api\n") || !strings.Contains(file, "Host berth-prod\n") {
		t.Errorf("replacing this gateway's: %d entries, want dev and prod:\n%s", n, file)
	}
}

func TestProxyCommand(t *testing.T) {
	got := openssh.ProxyCommand("/opt/my tools/berth", "https://gw.example/100%", "it's")
	want := `'/opt/my tools/berth' sandbox proxy --url https://gw.example/100%% 'it'\''s'`
	if got != want {
		t.Errorf("ProxyCommand = %s, want %s", got, want)
	}
}
