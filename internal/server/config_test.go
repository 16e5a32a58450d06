package server_test

import (
	"strings"
	"testing"

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
