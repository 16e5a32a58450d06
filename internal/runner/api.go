package runner

import "slices"

// API is a vendor's wire protocol for model calls, named as the gateway's
// inference names its dialects. A CLI speaks some of them; a model is
// served in the ones its provider speaks (SPEC S14: never translated).
type API string

// The APIs the gateway serves.
const (
	APIAnthropic       API = "anthropic-messages" // POST /v1/messages
	APIOpenAIChat      API = "openai-chat"        // POST /v1/chat/completions
	APIOpenAIResponses API = "openai-responses"   // POST /v1/responses
	APIGemini          API = "gemini"             // POST /v1beta/models/{model}:streamGenerateContent
)

// Speaks returns the API r would call m in: the first of r's APIs (its
// preference order) that m's provider speaks. ok is false when they share
// none: the run's first call would fail.
func Speaks(r Runner, m Model) (api API, ok bool) {
	return pick(r.APIs(), m)
}

// pick is Speaks over a list of APIs.
func pick(speaks []API, m Model) (API, bool) {
	for _, a := range speaks {
		if slices.Contains(m.APIs, a) {
			return a, true
		}
	}
	return "", false
}

// apiOf is the API a config file writes m in: the first of speaks that m's
// provider speaks, or, for a model whose APIs the gateway did not say (a
// model the run names that is not in the gateway's list, as in berth
// image check), the CLI's first. ok is false when m's provider speaks none
// of them.
func apiOf(speaks []API, m Model) (API, bool) {
	if len(m.APIs) == 0 {
		return speaks[0], true
	}
	return pick(speaks, m)
}
