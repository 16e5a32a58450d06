package runner

import (
	"bytes"
	"encoding/json"
	"strings"
	"unicode/utf8"
)

// What every gateway-bound config shares (SPEC S14).
const (
	// provider is the name the CLIs' configs give the gateway.
	provider = "berth"
	// keyVar holds the sandbox's own key; configs name it, never copy it.
	keyVar = "BERTH_API_KEY"
	// sessionVar and sessionHeader name the agent's session to the gateway.
	sessionVar    = "BERTH_SESSION"
	sessionHeader = "X-Berth-Session"
)

// decode reads a line that must be one JSON object into v. Anything else,
// or an object whose fields have the wrong shape, is Invalid and leaves
// nothing half-used: callers act only on Parsed.
func decode(line []byte, v any) Outcome {
	line = bytes.TrimSpace(line)
	if len(line) == 0 || line[0] != '{' {
		return Invalid
	}
	if err := json.Unmarshal(line, v); err != nil {
		return Invalid
	}
	return Parsed
}

// renderJSON writes a config file: indented, keys in a fixed order (struct
// order, sorted map keys), no HTML escaping, one trailing newline.
func renderJSON(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// tomlString quotes s as a TOML basic string.
func tomlString(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, c := range s {
		switch {
		case c == '"' || c == '\\':
			b.WriteByte('\\')
			b.WriteRune(c)
		case c < 0x20 || c == 0x7f:
			const hex = "0123456789ABCDEF"
			b.WriteString(`\u00`)
			b.WriteByte(hex[c>>4])
			b.WriteByte(hex[c&0xf])
		case c == utf8.RuneError:
			b.WriteString(`\uFFFD`)
		default:
			b.WriteRune(c)
		}
	}
	b.WriteByte('"')
	return b.String()
}

// gatewayEnv validates g for a runner whose environment does not depend on
// it, so every runner refuses the same bad gateways.
func gatewayEnv(g Gateway, vars ...EnvVar) ([]EnvVar, error) {
	if _, err := g.baseURL(); err != nil {
		return nil, err
	}
	return vars, nil
}

// noFiles validates g and o for a runner that needs no config file.
func noFiles(g Gateway, o Options) ([]File, error) {
	_, _, err := g.forRun(o)
	return nil, err
}
