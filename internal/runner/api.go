package runner

import (
	"fmt"
	"slices"
)

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

// callable pairs each of models with the API r's config writes it in: the
// first of r's APIs that its provider speaks or, for a model whose APIs
// the gateway did not say (one the run names that is not in the gateway's
// list, as in berth image check), r's first. A model served in none of
// r's APIs is left out; when it is the run's model (run), that is an
// error: the run could not call it.
func callable(r Runner, run string, models []Model) ([]Model, []API, error) {
	var out []Model
	var apis []API
	for _, m := range models {
		api, ok := r.APIs()[0], true
		if len(m.APIs) > 0 {
			api, ok = pick(r.APIs(), m)
		}
		if !ok {
			if m.ID == run {
				return nil, nil, fmt.Errorf("model %s is served in %v, none of which %s speaks", m.ID, m.APIs, r.Name())
			}
			continue
		}
		out, apis = append(out, m), append(apis, api)
	}
	return out, apis, nil
}
