package modelserver_test

import (
	"path/filepath"
	"testing"
)

// How each agent CLI is pointed at the server with no outbound calls, and
// where its stdout keeps the run's telemetry (shared/notes/agent-clis.md).

func claude() agentCLI {
	return agentCLI{
		bin: "claude",
		setup: func(t *testing.T, home, url string) ([]string, []string) {
			return []string{"-p", "--output-format", "stream-json", "--verbose", "--dangerously-skip-permissions", "--model", "claude-sonnet-4-5"},
				[]string{"ANTHROPIC_BASE_URL=" + url, "ANTHROPIC_API_KEY=sk-ant-mock",
					"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1", "DISABLE_AUTOUPDATER=1", "DISABLE_TELEMETRY=1",
					"DISABLE_ERROR_REPORTING=1", "IS_SANDBOX=1"} // IS_SANDBOX: tests may run as root
		},
		read: func(t *testing.T, out []byte) outcome {
			var o outcome
			type usage struct {
				Input      int `json:"input_tokens"`
				CacheRead  int `json:"cache_read_input_tokens"`
				CacheWrite int `json:"cache_creation_input_tokens"`
				Output     int `json:"output_tokens"`
			}
			lines(t, out, func(l struct {
				Type    string `json:"type"`
				IsError bool   `json:"is_error"`
				Result  string `json:"result"`
				Usage   usage  `json:"usage"`
			}) {
				if l.Type == "result" { // the run's totals; never sum the assistant lines
					o = outcome{totals: totals(l.Usage), text: l.Result, failed: l.IsError}
				}
			})
			return o
		},
		errorExit: 1,
	}
}

// pi speaks api to the server's base URL plus suffix.
func pi(api, suffix string) agentCLI {
	return agentCLI{
		bin: "pi",
		setup: func(t *testing.T, home, url string) ([]string, []string) {
			writeFile(t, home, ".pi/agent/models.json", map[string]any{"providers": map[string]any{"mock": map[string]any{
				"baseUrl": url + suffix, "api": api, "apiKey": "sk-mock",
				"models": []any{map[string]any{"id": "mock-model", "name": "Mock Model", "contextWindow": 128000, "maxTokens": 4096,
					"cost": map[string]any{"input": 3, "output": 15, "cacheRead": 0.3, "cacheWrite": 3.75}}},
			}}})
			return []string{"-p", "--mode", "json", "--provider", "mock", "--model", "mock-model"}, []string{"PI_OFFLINE=1"}
		},
		read: func(t *testing.T, out []byte) outcome {
			var o outcome
			lines(t, out, func(l struct {
				Type    string `json:"type"`
				Message struct {
					Role    string `json:"role"`
					Content []struct {
						Type string `json:"type"`
						Text string `json:"text"`
					} `json:"content"`
					Usage struct {
						Input      int `json:"input"`
						CacheRead  int `json:"cacheRead"`
						CacheWrite int `json:"cacheWrite"`
						Output     int `json:"output"`
					} `json:"usage"`
					StopReason string `json:"stopReason"`
				} `json:"message"`
			}) {
				if l.Type != "message_end" || l.Message.Role != "assistant" {
					return
				}
				u := l.Message.Usage // Pi reports no totals: sum its assistant messages
				o.Input, o.CacheRead, o.CacheWrite, o.Output = o.Input+u.Input, o.CacheRead+u.CacheRead, o.CacheWrite+u.CacheWrite, o.Output+u.Output
				o.failed = o.failed || l.Message.StopReason == "error"
				for _, c := range l.Message.Content {
					if c.Type == "text" {
						o.text = c.Text
					}
				}
			})
			return o
		},
		errorExit: 0, // Pi exits 0 on model errors
	}
}

func codex() agentCLI {
	return agentCLI{
		bin: "codex",
		setup: func(t *testing.T, home, url string) ([]string, []string) {
			writeFile(t, home, ".codex/config.toml", `model = "gpt-5.5"
model_provider = "mock"
check_for_update_on_startup = false
[model_providers.mock]
name = "Mock"
base_url = "`+url+`/v1"
env_key = "MOCK_API_KEY"
wire_api = "responses"
[features]
plugins = false
remote_plugin = false
apps = false
[analytics]
enabled = false
[feedback]
enabled = false
`)
			return []string{"exec", "--json", "--dangerously-bypass-approvals-and-sandbox", "--skip-git-repo-check"},
				[]string{"MOCK_API_KEY=sk-mock", "CODEX_HOME=" + filepath.Join(home, ".codex")}
		},
		read: func(t *testing.T, out []byte) outcome {
			var o outcome
			lines(t, out, func(l struct {
				Type string `json:"type"`
				Item struct {
					Type string `json:"type"`
					Text string `json:"text"`
				} `json:"item"`
				Usage struct {
					Input      int `json:"input_tokens"` // cached included
					Cached     int `json:"cached_input_tokens"`
					CacheWrite int `json:"cache_write_input_tokens"`
					Output     int `json:"output_tokens"`
				} `json:"usage"`
			}) {
				switch {
				case l.Type == "item.completed" && l.Item.Type == "agent_message":
					o.text = l.Item.Text
				case l.Type == "turn.completed":
					u := l.Usage
					o.totals = totals{Input: u.Input - u.Cached, CacheRead: u.Cached, CacheWrite: u.CacheWrite, Output: u.Output}
				case l.Type == "turn.failed", l.Type == "error":
					o.failed = true
				}
			})
			return o
		},
		errorExit: 1,
	}
}

func gemini() agentCLI {
	return agentCLI{
		bin: "gemini",
		setup: func(t *testing.T, home, url string) ([]string, []string) {
			writeFile(t, home, ".gemini/settings.json", map[string]any{
				"security":  map[string]any{"auth": map[string]any{"selectedType": "gemini-api-key"}},
				"privacy":   map[string]any{"usageStatisticsEnabled": false},
				"telemetry": map[string]any{"enabled": false},
				"general":   map[string]any{"disableAutoUpdate": true, "disableUpdateNag": true},
			})
			return []string{"-m", "gemini-2.5-pro", "--output-format", "stream-json", "--yolo"},
				[]string{"GEMINI_API_KEY=mock-key", "GOOGLE_GEMINI_BASE_URL=" + url, "GEMINI_CLI_TRUST_WORKSPACE=true"}
		},
		read: func(t *testing.T, out []byte) outcome {
			var o outcome
			delta := false // the previous line was part of the same assistant message
			lines(t, out, func(l struct {
				Type    string `json:"type"`
				Role    string `json:"role"`
				Content string `json:"content"`
				Status  string `json:"status"`
				Stats   struct {
					Input  int `json:"input"` // cached excluded
					Cached int `json:"cached"`
					Output int `json:"output_tokens"`
				} `json:"stats"`
			}) {
				if l.Type == "message" && l.Role == "assistant" {
					if !delta {
						o.text = ""
					}
					o.text += l.Content
					delta = true
					return
				}
				delta = false
				if l.Type == "result" {
					o.totals = totals{Input: l.Stats.Input, CacheRead: l.Stats.Cached, Output: l.Stats.Output}
					o.failed = l.Status == "error"
				}
			})
			return o
		},
		errorExit: 400 & 0xff, // the HTTP status, as an exit code
	}
}

// opencode talks to the server through the AI SDK provider package npm.
func opencode(npm string) agentCLI {
	return agentCLI{
		bin: "opencode",
		setup: func(t *testing.T, home, url string) ([]string, []string) {
			writeFile(t, home, ".config/opencode/opencode.json", map[string]any{
				"model": "mock/mock-model", "small_model": "mock/mock-model", "autoupdate": false, "share": "disabled",
				"snapshot": false, "permission": map[string]any{"edit": "allow", "bash": "allow", "webfetch": "allow"},
				"provider": map[string]any{"mock": map[string]any{"npm": npm, "name": "Mock",
					"options": map[string]any{"baseURL": url + "/v1", "apiKey": "sk-mock"},
					"models": map[string]any{"mock-model": map[string]any{"name": "Mock Model",
						"limit": map[string]any{"context": 128000, "output": 4096},
						"cost":  map[string]any{"input": 3, "output": 15, "cache_read": 0.3, "cache_write": 3.75}}}}},
			})
			return []string{"run", "--format", "json"},
				[]string{"OPENCODE_DISABLE_AUTOUPDATE=1", "OPENCODE_DISABLE_MODELS_FETCH=1", "OPENCODE_DISABLE_LSP_DOWNLOAD=1",
					"OPENCODE_DISABLE_DEFAULT_PLUGINS=1", "OPENCODE_DISABLE_SHARE=1"}
		},
		read: func(t *testing.T, out []byte) outcome {
			var o outcome
			lines(t, out, func(l struct {
				Type string `json:"type"`
				Part struct {
					Text   string `json:"text"`
					Tokens struct {
						Input  int `json:"input"`
						Output int `json:"output"`
						Cache  struct {
							Read  int `json:"read"`
							Write int `json:"write"`
						} `json:"cache"`
					} `json:"tokens"`
				} `json:"part"`
			}) {
				switch l.Type {
				case "text":
					o.text = l.Part.Text
				case "step_finish": // no totals: sum the steps
					k := l.Part.Tokens
					o.Input, o.CacheRead, o.CacheWrite, o.Output = o.Input+k.Input, o.CacheRead+k.Cache.Read, o.CacheWrite+k.Cache.Write, o.Output+k.Output
				case "error":
					o.failed = true
				}
			})
			return o
		},
		errorExit: 1,
	}
}
