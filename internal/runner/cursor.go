package runner

// cursor runs Cursor's agent CLI (`cursor-agent`). No stream of it was
// captured on these machines (it is not on the npm registry), so
// everything here follows Cursor's published CLI documentation
// (cursor.com/docs/cli: headless use, parameters, output format) and is
// unverified against a real run.
//
// The CLI has no base-URL setting: it reaches Cursor's own service with a
// Cursor key and never the gateway, so it implements VendorDirect.
type cursor struct{}

var _ VendorDirect = cursor{}

func (cursor) Name() string   { return "cursor" }
func (cursor) Binary() string { return "cursor-agent" }

// ContainerArgs: print mode with stream-json; --force runs commands
// without asking, --trust skips the workspace-trust prompt a fresh HOME
// would show, and --sandbox disabled turns off the CLI's own command
// sandbox, unwanted inside ours (as for Codex). Cursor has no effort flag:
// effort is part of its model names, so Effort is ignored.
func (cursor) ContainerArgs(o Options) ([]string, error) {
	if err := checkOptions(o); err != nil {
		return nil, err
	}
	args := []string{"-p", "--output-format", "stream-json", "--force", "--trust", "--sandbox", "disabled", "--model", o.Model}
	if o.Resume {
		// Documented as --resume=-1, the latest chat (~/.cursor/chats).
		args = append(args, "--continue")
	}
	return args, nil
}

// APIs: none of the gateway's; cursor talks to its vendor itself.
func (cursor) APIs() []API { return nil }

// Credentials: a Cursor API key, a vendor credential (see VendorDirect).
func (cursor) Credentials() []string { return []string{"CURSOR_API_KEY"} }

// Env: nothing to point at the gateway.
func (cursor) Env(g Gateway) ([]EnvVar, error) { return gatewayEnv(g) }

// Files: none; --force stands for the permissions file.
func (cursor) Files(g Gateway, o Options) ([]File, error) { return noFiles(g, o) }

// VendorDirect: the CLI talks to Cursor's service, not the gateway.
func (cursor) VendorDirect() string {
	return "Cursor's own service with a Cursor API key: the CLI cannot be pointed at the gateway"
}

// ParseLine reads Cursor's stream-json, documented as mirroring Claude
// Code's: system/init names model and session, one assistant line per
// message, tool_call lines (started, completed), and a terminal result with
// is_error. The documented result carries no usage and no cost; if a
// version adds Claude-shaped ones they are read, else tokens and cost stay
// unknown. A failed run may end without a result: the exit code tells.
func (cursor) ParseLine(t *Telemetry, line []byte) Outcome {
	return parseStreamJSON(t, line, cursorType)
}

func cursorType(typ string) bool {
	switch typ {
	case "system", "user", "assistant", "tool_call", "result":
		return true
	}
	return false
}
