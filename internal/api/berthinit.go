package api

// What berth-init and the host read of each other outside HTTP: the
// agent-run mode's config files in BERTH_RUNNER_FILES, and the report of
// the image check (SPEC S13).

// RunnerFile is one entry of BERTH_RUNNER_FILES, a JSON array: a config
// file of the runner, rendered by the host, with its path relative to
// HOME.
type RunnerFile struct {
	Path    string `json:"path"`
	Content string `json:"content"`
}

// CheckReport is what berth-init prints on stdout, as one JSON object, when
// BERTH_IMAGE_CHECK=1 asks it to check the agent-run contract (SPEC S13)
// instead of starting the agent: `berth image check` reads it. It has gone
// through the prompt check, written the runner's files and prepared git
// exactly as for a run; the exec is all it left out.
type CheckReport struct {
	// Runner is BERTH_RUNNER; empty when none was named.
	Runner string `json:"runner"`
	// Argv is the command line the agent would have been exec'd with: the
	// runner's binary, then the "$@" slot as received.
	Argv []string `json:"argv"`
	// Stdin is what the agent would have read on its standard input: the
	// prompt file, handed over as file descriptor 0 and read back from it.
	Stdin CheckStdin `json:"stdin"`
	// Elements are the contract's elements as seen from inside, in a fixed
	// order.
	Elements []CheckElement `json:"elements"`
}

// CheckStdin describes the standard input berth-init hands the agent.
type CheckStdin struct {
	Bytes  int64  `json:"bytes"`
	SHA256 string `json:"sha256"` // hex
}

// CheckElement is one element of the contract and whether it holds.
type CheckElement struct {
	Name   string `json:"name"`
	OK     bool   `json:"ok"`
	Detail string `json:"detail"`
}
