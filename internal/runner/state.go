package runner

// Stateful is implemented by a runner whose CLI keeps its conversations
// under HOME, where a run with Options.Resume finds the last one again: an
// agent session's tasks share HOME so that these paths survive from one
// container to the next. Every runner of the table implements it; each CLI
// can resume (Options.Resume), so none needs a transcript summary instead.
//
// What each CLI keeps, measured on the pinned versions (a run in /work;
// every CLI keys its conversations by the working directory, OpenCode by
// the checkout's repository):
//
//	Claude Code  ~/.claude/projects/-work/<session>.jsonl, the transcripts
//	             --continue reads; ~/.claude.json, the install's ids
//	             (userID, machineID) and settings
//	Codex        ~/.codex/sessions/YYYY/MM/DD/rollout-…-<thread>.jsonl and
//	             the SQLite databases in ~/.codex (state_5.sqlite, …)
//	OpenCode     ~/.local/share/opencode/opencode.db (-wal, -shm): every
//	             session's messages; the project is the repository's root
//	             commit, cached in the checkout's .git/opencode
//	Gemini CLI   ~/.gemini/tmp/work/chats/session-…jsonl, and
//	             ~/.gemini/projects.json, which names the directory's
//	             project ("work")
//	Pi           ~/.pi/agent/sessions/--work--/<time>_<session>.jsonl
//	Cursor       ~/.cursor (its chats; from Cursor's documentation, not
//	             measured)
//
// The runner's config files, which berth-init writes at every start
// (RunFiles), are config beside that state, never in it, and are replaced
// whole by a rename, so a run leaves the conversations as it found them.
// Some CLIs rewrite their config on start (OpenCode adds "$schema", Gemini
// CLI renames general.disableAutoUpdate and disableUpdateNag); the next
// start writes berth's again, and the CLI does the same again. One
// overlap: with MCP servers Claude Code's are written to ~/.claude.json,
// replacing the keys Claude Code keeps there with just mcpServers; it
// writes its keys back on start, under new ids, and --continue still
// finds the conversation (the transcripts are under ~/.claude).
type Stateful interface {
	// StatePaths are the files and directories that hold the CLI's
	// state, relative to HOME with forward slashes.
	StatePaths() []string
}

// StatePaths: the transcripts (~/.claude) and the install's state file.
func (claudeCode) StatePaths() []string { return []string{".claude", ".claude.json"} }

// StatePaths: CODEX_HOME, sessions and their indexes.
func (codex) StatePaths() []string { return []string{".codex"} }

// StatePaths: OpenCode's data directory (XDG_DATA_HOME/opencode).
func (opencode) StatePaths() []string { return []string{".local/share/opencode"} }

// StatePaths: Gemini CLI's directory, chats and the projects they belong to.
func (gemini) StatePaths() []string { return []string{".gemini"} }

// StatePaths: Pi's sessions.
func (pi) StatePaths() []string { return []string{".pi/agent/sessions"} }

// StatePaths: Cursor's directory (unverified, see cursor).
func (cursor) StatePaths() []string { return []string{".cursor"} }
