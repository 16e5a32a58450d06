package server_test

import (
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"berth.dev/berth/internal/sandbox"
	"berth.dev/berth/internal/server"
)

// TestKubernetesSettings: the kubernetes driver's settings are read and
// checked at start-up; a name Kubernetes would refuse stops the start,
// naming the setting, instead of failing every sandbox later.
func TestKubernetesSettings(t *testing.T) {
	base := map[string]string{"BERTH_SANDBOX_DRIVER": "kubernetes", "HOME": t.TempDir()}
	tests := []struct {
		name    string
		env     map[string]string
		wantErr string // "" for none
	}{
		{"minimal", nil, ""},
		{"every setting", map[string]string{
			"BERTH_SANDBOX_NAMESPACE": "berth-sandboxes", "BERTH_SANDBOX_STORAGE_CLASS": "fast-ssd",
			"BERTH_SANDBOX_SERVICE_ACCOUNT": "berth-sandbox", "BERTH_SANDBOX_IMAGE_PULL_SECRETS": "registry, mirror",
			"BERTH_SANDBOX_RUNTIME_ISOLATED": "gvisor", "BERTH_SANDBOX_RUNTIME_VM": "kata-qemu", "BERTH_SANDBOX_WARM": "on",
			"KUBECONFIG": "/etc/berth/kubeconfig", "BERTH_SANDBOX_INIT_IMAGE": "registry.example/berth-sandbox:1",
		}, ""},
		{"bad namespace", map[string]string{"BERTH_SANDBOX_NAMESPACE": "Berth_Sandboxes"}, "BERTH_SANDBOX_NAMESPACE"},
		{"runtime path", map[string]string{"BERTH_SANDBOX_RUNTIME_ISOLATED": "/usr/local/bin/runsc"}, "BERTH_SANDBOX_RUNTIME_ISOLATED"},
		{"bad secret", map[string]string{"BERTH_SANDBOX_IMAGE_PULL_SECRETS": "ok,Not OK"}, "BERTH_SANDBOX_IMAGE_PULL_SECRETS"},
		{"bad warm", map[string]string{"BERTH_SANDBOX_WARM": "sometimes"}, "BERTH_SANDBOX_WARM"},
		{"bad init image", map[string]string{"BERTH_SANDBOX_INIT_IMAGE": "berth sandbox"}, "BERTH_SANDBOX_INIT_IMAGE"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			env := map[string]string{}
			for k, v := range base {
				env[k] = v
			}
			for k, v := range tt.env {
				env[k] = v
			}
			cfg, err := server.LoadConfig(func(k string) string { return env[k] })
			if tt.wantErr == "" {
				if err != nil {
					t.Fatalf("LoadConfig = %v, want no error", err)
				}
				if cfg.Driver != "kubernetes" || cfg.Kubeconfig != env["KUBECONFIG"] || cfg.Namespace != env["BERTH_SANDBOX_NAMESPACE"] {
					t.Errorf("config = driver %q, kubeconfig %q, namespace %q", cfg.Driver, cfg.Kubeconfig, cfg.Namespace)
				}
				if cfg.InitImage != env["BERTH_SANDBOX_INIT_IMAGE"] {
					t.Errorf("init image = %q, want %q", cfg.InitImage, env["BERTH_SANDBOX_INIT_IMAGE"])
				}
				if rt := env["BERTH_SANDBOX_RUNTIME_ISOLATED"]; rt != "" && cfg.Runtimes[sandbox.TierIsolated] != rt {
					t.Errorf("isolated runtime = %q, want %q", cfg.Runtimes[sandbox.TierIsolated], rt)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("LoadConfig = %v, want an error naming %s", err, tt.wantErr)
			}
		})
	}
}

// The panel terminal's CA is in the data directory unless a file every
// replica shares is named.
func TestTerminalCAFile(t *testing.T) {
	for _, tt := range []struct {
		env  map[string]string
		want string
	}{
		{map[string]string{"BERTH_DATA_DIR": "/var/lib/berth"}, "/var/lib/berth/terminal_ca"},
		{map[string]string{"BERTH_DATA_DIR": "/var/lib/berth", "BERTH_TERMINAL_CA_FILE": "/etc/berth/terminal_ca"}, "/etc/berth/terminal_ca"},
	} {
		cfg, err := server.LoadConfig(func(k string) string { return tt.env[k] })
		if err != nil {
			t.Fatal(err)
		}
		if cfg.TerminalCA != tt.want {
			t.Errorf("with %v: terminal CA %q, want %q", tt.env, cfg.TerminalCA, tt.want)
		}
	}
}

// TestPreviewDomainSetting: BERTH_PREVIEW_DOMAIN is read lowercase, off
// when unset, and refused when it is not a DNS name or holds the
// gateway's own host (previews would share the gateway's origin).
func TestPreviewDomainSetting(t *testing.T) {
	tests := []struct {
		name, domain, public string
		want, wantErr        string
	}{
		{"unset", "", "", "", ""},
		{"a domain", "Preview.Berth.Example.com.", "https://berth.example.com", "preview.berth.example.com", ""},
		{"localhost", "preview.localhost", "", "preview.localhost", ""},
		{"one label", "preview", "", "", "BERTH_PREVIEW_DOMAIN"},
		{"not a name", "pre_view.example.com", "", "", "BERTH_PREVIEW_DOMAIN"},
		{"the gateway's host", "example.com", "https://berth.example.com", "", "holds the gateway's own host"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			env := map[string]string{"HOME": t.TempDir(), "BERTH_PREVIEW_DOMAIN": tt.domain, "BERTH_PUBLIC_URL": tt.public}
			cfg, err := server.LoadConfig(func(k string) string { return env[k] })
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("LoadConfig = %v, want an error with %q", err, tt.wantErr)
				}
				return
			}
			if err != nil || cfg.PreviewDomain != tt.want {
				t.Fatalf("LoadConfig = %q, %v; want %q", cfg.PreviewDomain, err, tt.want)
			}
		})
	}
}

// TestOIDCSettings: the identity provider's settings are read and checked
// at start-up, the client secret from its file (never the environment),
// every problem named by its setting; the panel's key sign-in is turned
// off only where another way in exists.
func TestOIDCSettings(t *testing.T) {
	dir := t.TempDir()
	secretFile := dir + "/secret"
	if err := os.WriteFile(secretFile, []byte("s3cret\nignored\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	empty := dir + "/empty"
	if err := os.WriteFile(empty, []byte("\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	good := map[string]string{"BERTH_OIDC_ISSUER": "https://idp.example.com/realms/x/", "BERTH_OIDC_CLIENT_ID": "berth", "BERTH_OIDC_CLIENT_SECRET_FILE": secretFile}
	with := func(kv ...string) map[string]string {
		env := map[string]string{}
		for k, v := range good {
			env[k] = v
		}
		for i := 0; i < len(kv); i += 2 {
			env[kv[i]] = kv[i+1]
		}
		return env
	}
	for _, tt := range []struct {
		name    string
		env     map[string]string
		wantErr string
	}{
		{"none", map[string]string{}, ""},
		{"a provider", good, ""},
		{"every setting", with("BERTH_OIDC_SCOPES", "openid, email, groups", "BERTH_OIDC_GROUPS_CLAIM", "groups_direct", "BERTH_OIDC_OPERATOR_GROUPS", "ops, sre",
			"BERTH_OIDC_KEY_TTL", "8h", "BERTH_OIDC_REFRESH_INTERVAL", "1m", "BERTH_PANEL_KEY_SIGNIN", "off"), ""},
		{"loopback http", with("BERTH_OIDC_ISSUER", "http://127.0.0.1:4444"), ""},
		{"plain http elsewhere", with("BERTH_OIDC_ISSUER", "http://idp.example.com"), "BERTH_OIDC_ISSUER"},
		{"no client", with("BERTH_OIDC_CLIENT_ID", ""), "BERTH_OIDC_CLIENT_ID"},
		{"no secret file", with("BERTH_OIDC_CLIENT_SECRET_FILE", ""), "BERTH_OIDC_CLIENT_SECRET_FILE"},
		{"a missing secret file", with("BERTH_OIDC_CLIENT_SECRET_FILE", dir+"/nope"), "BERTH_OIDC_CLIENT_SECRET_FILE"},
		{"an empty secret file", with("BERTH_OIDC_CLIENT_SECRET_FILE", empty), "is empty"},
		{"scopes without openid", with("BERTH_OIDC_SCOPES", "email,groups"), "BERTH_OIDC_SCOPES"},
		{"a key for a month", with("BERTH_OIDC_KEY_TTL", "30d"), "BERTH_OIDC_KEY_TTL"},
		{"refresh every day and more", with("BERTH_OIDC_REFRESH_INTERVAL", "2d"), "BERTH_OIDC_REFRESH_INTERVAL"},
		{"key sign-in off without a provider", map[string]string{"BERTH_PANEL_KEY_SIGNIN": "off"}, "BERTH_PANEL_KEY_SIGNIN"},
		{"key sign-in maybe", with("BERTH_PANEL_KEY_SIGNIN", "maybe"), "BERTH_PANEL_KEY_SIGNIN"},
		{"a client without a provider", map[string]string{"BERTH_OIDC_CLIENT_ID": "berth"}, "BERTH_OIDC_CLIENT_ID"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			tt.env["HOME"] = dir
			cfg, err := server.LoadConfig(func(k string) string { return tt.env[k] })
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("LoadConfig = %v, want an error with %q", err, tt.wantErr)
				}
				if strings.Contains(err.Error(), "s3cret") {
					t.Fatalf("the error shows the client secret: %v", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			o := cfg.OIDC
			if tt.env["BERTH_OIDC_ISSUER"] == "" {
				if o.Issuer != "" || !cfg.KeySignIn {
					t.Errorf("no provider: %+v, key sign-in %v", o, cfg.KeySignIn)
				}
				return
			}
			if o.Issuer != strings.TrimSuffix(tt.env["BERTH_OIDC_ISSUER"], "/") || o.ClientID != "berth" || o.ClientSecret.Reveal() != "s3cret" {
				t.Errorf("the provider: %+v (secret %q)", o, o.ClientSecret.Reveal())
			}
			if tt.name == "every setting" {
				if !slices.Equal(o.Scopes, []string{"openid", "email", "groups"}) || o.GroupsClaim != "groups_direct" || !slices.Equal(o.Operators, []string{"ops", "sre"}) ||
					o.KeyTTL != 8*time.Hour || o.RefreshEvery != time.Minute || cfg.KeySignIn {
					t.Errorf("every setting: %+v, key sign-in %v", o, cfg.KeySignIn)
				}
			} else if o.KeyTTL != 12*time.Hour || o.RefreshEvery != 5*time.Minute || o.GroupsClaim != "groups" || o.Scopes != nil || !cfg.KeySignIn {
				t.Errorf("the defaults: %+v, key sign-in %v", o, cfg.KeySignIn)
			}
		})
	}
}

// TestEgressSettings: the egress proxy's connect-to and resolve settings
// are read at start-up, and a bad pair stops the start naming the setting
// and the pair.
func TestEgressSettings(t *testing.T) {
	env := map[string]string{"HOME": t.TempDir(),
		"BERTH_EGRESS_CONNECT_TO": "registry.test:443=127.0.0.1:8443", "BERTH_EGRESS_RESOLVE": "meta.test=169.254.169.254"}
	cfg, err := server.LoadConfig(func(k string) string { return env[k] })
	if err != nil || cfg.EgressConnectTo["registry.test:443"] != "127.0.0.1:8443" || cfg.EgressHosts["meta.test"][0].String() != "169.254.169.254" {
		t.Fatalf("LoadConfig: %+v %+v, %v", cfg.EgressConnectTo, cfg.EgressHosts, err)
	}
	for k, v := range map[string]string{"BERTH_EGRESS_CONNECT_TO": "registry.test=localhost:8443", "BERTH_EGRESS_RESOLVE": "meta.test=metadata"} {
		bad := map[string]string{"HOME": env["HOME"], k: v}
		_, err := server.LoadConfig(func(k string) string { return bad[k] })
		if err == nil || !strings.Contains(err.Error(), k) || !strings.Contains(err.Error(), v) {
			t.Errorf("%s=%s: %v, want an error naming the setting and the pair", k, v, err)
		}
	}
	if !strings.Contains(server.SettingsHelp, "BERTH_EGRESS_CONNECT_TO") || !strings.Contains(server.SettingsHelp, "BERTH_EGRESS_RESOLVE") {
		t.Error("berth serve --help does not list the egress settings")
	}
}

// TestPodmanStandbySetting: a sandbox suspended with its memory waits
// made for 24 hours unless BERTH_SANDBOX_PODMAN_STANDBY says otherwise; 0
// keeps none; a negative or unreadable value is refused by name.
func TestPodmanStandbySetting(t *testing.T) {
	for _, tt := range []struct {
		value   string
		want    time.Duration
		wantErr string
	}{
		{"", 24 * time.Hour, ""},
		{"2h", 2 * time.Hour, ""},
		{"7d", 7 * 24 * time.Hour, ""},
		{"0", 0, ""},
		{"-1h", 0, "BERTH_SANDBOX_PODMAN_STANDBY"},
		{"soon", 0, "BERTH_SANDBOX_PODMAN_STANDBY"},
	} {
		env := map[string]string{"HOME": t.TempDir(), "BERTH_SANDBOX_PODMAN_STANDBY": tt.value}
		cfg, err := server.LoadConfig(func(k string) string { return env[k] })
		if tt.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("BERTH_SANDBOX_PODMAN_STANDBY=%q: LoadConfig = %v, want an error naming %s", tt.value, err, tt.wantErr)
			}
			continue
		}
		if err != nil || cfg.PodmanStandby != tt.want {
			t.Errorf("BERTH_SANDBOX_PODMAN_STANDBY=%q: %v, %v; want %v", tt.value, cfg.PodmanStandby, err, tt.want)
		}
	}
}
