package cli

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"berth.dev/berth/internal/server"
)

// The commands that work on the gateway's host (berth admin, repo, image)
// read the settings of the gateway they belong to, found the way every
// other command finds its gateway: --url, else BERTH_URL, else the login
// file. berth serve records, when it starts:
//   - its settings (the BERTH_* variables it read, but a database URL that
//     holds a password) in settingsFile in its data directory, and
//   - its data directory under the port it listens on, in the user's state
//     directory (gatewaysDir).
//
// An on-host command then takes its data directory from BERTH_DATA_DIR, else
// from the record of the gateway at its address when that is on this
// machine, and every setting from its own environment first, else from the
// data directory's settingsFile. So after `make up`, `berth repo list` finds
// the local forge and `berth admin podman-env` the store of make up's
// gateway with nothing exported but what the login needs.
const settingsFile = "settings.json"

// gatewaysDir is $XDG_STATE_HOME/berth/gateways, else
// ~/.local/state/berth/gateways.
func gatewaysDir(env Env) string {
	if x := env.Getenv("XDG_STATE_HOME"); x != "" {
		return filepath.Join(x, "berth", "gateways")
	}
	if h := env.Getenv("HOME"); h != "" {
		return filepath.Join(h, ".local", "state", "berth", "gateways")
	}
	return ""
}

// gatewayRecord is what berth serve leaves in gatewaysDir for its port.
type gatewayRecord struct {
	Addr    string `json:"addr"`
	DataDir string `json:"data_dir"`
}

// recordSettings is berth serve's part: what on-host commands need to find
// this gateway's settings.
func recordSettings(env Env, cfg server.Config) error {
	settings := map[string]string{}
	_, _ = server.LoadConfig(func(k string) string {
		v := env.Getenv(k)
		if v != "" && recorded(k, v) {
			settings[k] = v
		}
		return v
	})
	dataDir, err := filepath.Abs(cfg.DataDir)
	if err != nil {
		return err
	}
	settings["BERTH_DATA_DIR"] = dataDir
	if err := writePrivateJSON(filepath.Join(dataDir, settingsFile), settings); err != nil {
		return err
	}
	_, port, err := net.SplitHostPort(cfg.Addr)
	dir := gatewaysDir(env)
	if err != nil || dir == "" {
		return nil // no port to file it under, or no home: BERTH_DATA_DIR it is
	}
	return writePrivateJSON(filepath.Join(dir, port+".json"), gatewayRecord{Addr: cfg.Addr, DataDir: dataDir})
}

// recorded reports whether setting k=v goes into settingsFile: the
// gateway's own settings, never a client's (a key, the login file) or a
// test's, nor a database URL carrying a password.
func recorded(k, v string) bool {
	switch {
	case k == "KUBECONFIG":
		return true
	case !strings.HasPrefix(k, "BERTH_"), strings.HasPrefix(k, "BERTH_TEST_"):
		return false
	case k == "BERTH_API_KEY", k == "BERTH_INVITATION", k == "BERTH_URL", k == "BERTH_CONFIG":
		return false
	case k == "BERTH_DATABASE_URL":
		u, err := url.Parse(v)
		if err != nil {
			return false
		}
		_, hasPassword := u.User.Password()
		return !hasPassword
	}
	return true
}

// hostConfig is the configuration of the gateway an on-host command
// belongs to (see settingsFile).
func hostConfig(cmd *cobra.Command, env Env) (server.Config, error) {
	dataDir := strings.TrimSpace(env.Getenv("BERTH_DATA_DIR"))
	if dataDir == "" {
		dataDir = registeredDataDir(cmd, env)
	}
	if dataDir == "" {
		// The default data directory, which a gateway started without
		// BERTH_DATA_DIR records its settings in too.
		if cfg, err := server.LoadConfig(env.Getenv); err == nil {
			dataDir = cfg.DataDir
		}
	}
	file, err := readSettings(dataDir)
	if err != nil {
		return server.Config{}, err
	}
	return server.LoadConfig(func(k string) string {
		if v := env.Getenv(k); strings.TrimSpace(v) != "" {
			return v
		}
		if k == "BERTH_DATA_DIR" && dataDir != "" {
			return dataDir
		}
		return file[k]
	})
}

// registeredDataDir is the data directory berth serve recorded for the
// port of the gateway this command talks to, when that gateway is on this
// machine; "" when none is recorded.
func registeredDataDir(cmd *cobra.Command, env Env) string {
	g := &globals{env: env}
	if f := cmd.Flag("url"); f != nil {
		g.url = f.Value.String()
	}
	lf, _ := g.readLogin()
	raw, err := g.gatewayURL(lf)
	if err != nil {
		return ""
	}
	u, err := url.Parse(raw)
	if err != nil || !onThisMachine(u.Hostname()) {
		return ""
	}
	port := u.Port()
	if port == "" {
		port = map[string]string{"http": "80", "https": "443"}[u.Scheme]
	}
	dir := gatewaysDir(env)
	if dir == "" {
		return ""
	}
	b, err := os.ReadFile(filepath.Join(dir, port+".json"))
	if err != nil {
		return ""
	}
	var rec gatewayRecord
	if json.Unmarshal(b, &rec) != nil {
		return ""
	}
	return rec.DataDir
}

func onThisMachine(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// readSettings reads a data directory's settingsFile; none when it has
// none (a gateway that never started there).
func readSettings(dataDir string) (map[string]string, error) {
	if dataDir == "" {
		return nil, nil
	}
	path := filepath.Join(dataDir, settingsFile)
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("the gateway's settings: %w", err)
	}
	var m map[string]string
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("the gateway's settings %s are not valid JSON: %w (berth serve writes them again when it starts)", path, err)
	}
	return m, nil
}
