package inference

// ErrorBody is a refusal in dialect d's own error shape, so each vendor's
// client shows its message: Anthropic's {type: error, error: {type,
// message}}, OpenAI's {error: {message, type, param, code}} (type and code
// are berth's code), Gemini's {error: {code, message, status}}.
func ErrorBody(d Dialect, status int, code, message string) any {
	type obj = map[string]any
	switch d {
	case Anthropic:
		return obj{"type": "error", "error": obj{"type": anthropicErrorType(status), "message": message}}
	case Gemini:
		return obj{"error": obj{"code": status, "message": message, "status": googleStatus(status)}}
	}
	return obj{"error": obj{"message": message, "type": code, "param": nil, "code": code}}
}

// anthropicErrorType is the error type Anthropic sends with status.
func anthropicErrorType(status int) string {
	switch status {
	case 400:
		return "invalid_request_error"
	case 401:
		return "authentication_error"
	case 402:
		return "billing_error"
	case 403:
		return "permission_error"
	case 404:
		return "not_found_error"
	case 413:
		return "request_too_large"
	case 429:
		return "rate_limit_error"
	}
	return "api_error"
}

// googleStatus is the status name Google's APIs send with an HTTP status.
func googleStatus(status int) string {
	switch status {
	case 400:
		return "INVALID_ARGUMENT"
	case 401:
		return "UNAUTHENTICATED"
	case 402, 429:
		return "RESOURCE_EXHAUSTED"
	case 403:
		return "PERMISSION_DENIED"
	case 404:
		return "NOT_FOUND"
	case 413:
		// Google's APIs call a payload over their limit an invalid
		// argument.
		return "INVALID_ARGUMENT"
	case 502:
		return "UNAVAILABLE"
	}
	return "INTERNAL"
}
