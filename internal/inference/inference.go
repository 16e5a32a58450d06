// Package inference is the model side of the gateway (SPEC S14): which
// models a key may reach, the budget its inference is charged to (with
// reservations, so concurrent requests cannot overshoot), its rate limit,
// the system prompt every request carries, and metering every token from
// the upstream's own answer.
//
// It is a domain package: no HTTP and no database. The gateway's proxy
// (internal/gateway/inference.go) authenticates a request, asks Admit for a
// Ticket (the route, the rewritten body, the reservation), sends the body
// upstream, passes the answer back as it arrives while a Meter reads it,
// and hands the metered usage to Settle, which charges the budget and
// records the request for its session. The store keeps settings and usage
// behind the Store interface declared here.
//
// Four vendor dialects are spoken, each with its own request shape, system
// prompt slot, usage fields and error body; they are never translated into
// one another: a model is served by one provider, which speaks the dialects
// of its kind.
package inference

import (
	"strings"

	"berth.dev/berth/internal/runner"
)

// Dialect is a vendor API, named as the runners name the APIs they speak
// (runner.API).
type Dialect string

// The dialects the gateway speaks.
const (
	Anthropic       = Dialect(runner.APIAnthropic)       // POST /v1/messages
	OpenAIChat      = Dialect(runner.APIOpenAIChat)      // POST /v1/chat/completions
	OpenAIResponses = Dialect(runner.APIOpenAIResponses) // POST /v1/responses
	Gemini          = Dialect(runner.APIGemini)          // POST /v1beta/models/{model}:generateContent
)

// Path is where the gateway serves the dialect, for messages.
func (d Dialect) Path() string {
	switch d {
	case Anthropic:
		return "POST /v1/messages"
	case OpenAIChat:
		return "POST /v1/chat/completions"
	case OpenAIResponses:
		return "POST /v1/responses"
	case Gemini:
		return "POST /v1beta/models/{model}:generateContent"
	}
	return string(d)
}

// Kind is what a provider is: which vendor API it speaks and how it takes
// its credential.
type Kind string

// Provider kinds.
const (
	// KindAnthropic speaks Anthropic Messages; the credential goes in
	// x-api-key.
	KindAnthropic Kind = "anthropic"
	// KindOpenAI speaks Chat Completions and Responses (OpenAI and every
	// compatible server); the credential goes in Authorization: Bearer.
	KindOpenAI Kind = "openai"
	// KindGemini speaks generateContent; the credential goes in
	// x-goog-api-key.
	KindGemini Kind = "gemini"
	// KindScripted is the scripted model server (package modelserver),
	// served inside the gateway for offline demos and tests. It speaks every
	// dialect, needs no credential, and its answers are scripted, not a
	// model's.
	KindScripted Kind = "scripted"
)

// Dialects lists what a provider of kind k speaks.
func (k Kind) Dialects() []Dialect {
	switch k {
	case KindAnthropic:
		return []Dialect{Anthropic}
	case KindOpenAI:
		return []Dialect{OpenAIChat, OpenAIResponses}
	case KindGemini:
		return []Dialect{Gemini}
	case KindScripted:
		return []Dialect{Anthropic, OpenAIChat, OpenAIResponses, Gemini}
	}
	return nil
}

// Speaks reports whether a provider of kind k speaks d.
func (k Kind) Speaks(d Dialect) bool {
	for _, x := range k.Dialects() {
		if x == d {
			return true
		}
	}
	return false
}

// names joins model names for a message; none says so.
func names(models []string) string {
	if len(models) == 0 {
		return "none"
	}
	return strings.Join(models, ", ")
}
