package entrypoint

import (
	"bytes"
	"fmt"
	"log/slog"
	"strings"
	"testing"
)

// TestCredentialsStayRedacted: the sandbox's key and a warm pool's
// bootstrap token, as berth-init holds them, show in no print or log of
// what holds them; only the request that hands them over reveals them.
func TestCredentialsStayRedacted(t *testing.T) {
	const key, token = "berth_sk_0123_s3cr3tKEY", "bst_s3cr3tTOKEN"
	vars := map[string]string{"BERTH_SANDBOX_ID": "sbx_1", "BERTH_SANDBOX_NAME": "fix", "BERTH_SANDBOX_PURPOSE": "agent",
		"HOME": "/home/berth", "BERTH_API_KEY": key, "BERTH_BASE_URL": "http://gateway.test:8080"}
	cfg, err := loadConfig(func(k string) string { return vars[k] }, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	gw := newRunGateway(cfg, Env{}, 0, t.Logf)
	file := t.TempDir() + "/annotations"
	if err := writeFile(file, []byte(tokenAnnotation+`="`+token+`"`+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	bt, err := readToken(file)
	if err != nil || bt.Reveal() != token {
		t.Fatalf("readToken = %v, %v; want the token", bt, err)
	}
	var out []string
	for _, v := range []any{cfg, &cfg, gw, bt} {
		for _, verb := range []string{"%v", "%+v", "%#v", "%s"} {
			out = append(out, fmt.Sprintf(verb, v))
		}
		var buf bytes.Buffer
		slog.New(slog.NewJSONHandler(&buf, nil)).Info("held", "value", v)
		slog.New(slog.NewTextHandler(&buf, nil)).Info("held", "value", v)
		out = append(out, buf.String())
	}
	for _, o := range out {
		if strings.Contains(o, key) || strings.Contains(o, token) {
			t.Errorf("a credential shows: %s", o)
		}
	}
	if cfg.apiKey.Reveal() != key {
		t.Errorf("the key is %q, want it held", cfg.apiKey.Reveal())
	}
}
