package sandbox

import (
	"strings"
	"unicode/utf8"

	"berth.dev/berth/internal/fault"
	"berth.dev/berth/internal/kelos"
)

// MaxTask is the longest task (1 MiB) an agent sandbox takes under
// berth's image contract (SPEC S13.2): the host writes it to the prompt
// file and the agent reads it on stdin. A kelos image takes its task as
// one argument, and less (kelos.MaxPrompt).
const MaxTask = 1 << 20

// checkTask refuses a task the image's contract cannot be given. The task
// is never in a machine's environment: it reaches the agent as the prompt
// file on stdin (berth's contract) or as $1 (Kelos's, S13.6: kelos checks
// what its argument may hold). The store keeps it as text, so under
// either contract it is UTF-8 without NUL.
func checkTask(c Contract, task string) error {
	if c == ContractKelos {
		if err := kelos.CheckPrompt(task); err != nil {
			return fault.Field("task", "%v", err)
		}
	}
	switch {
	case len(task) > MaxTask:
		return fault.Field("task", "%d bytes; at most %d bytes (1 MiB: the agent reads it from the prompt file)", len(task), MaxTask)
	case strings.ContainsRune(task, 0):
		return fault.Field("task", "holds a NUL byte; a task is text")
	case !utf8.ValidString(task):
		return fault.Field("task", "is not UTF-8 text")
	}
	return nil
}
