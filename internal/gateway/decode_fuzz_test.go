package gateway

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"reflect"
	"testing"

	"berth.dev/berth/internal/api"
	"berth.dev/berth/internal/fault"
)

// FuzzDecode feeds the one request-body decoder arbitrary bodies for the
// wire types the routes decode, under a small limit. It never panics; a
// body it takes is exactly one JSON value (json.Valid) that reads back the
// same once encoded again; a body it refuses is refused on "body", as too
// large only when it is.
func FuzzDecode(f *testing.F) {
	for _, s := range []string{
		`{"name":"dev","class":"standard","ssh_keys":["ssh-ed25519 AAAA x"],"env":{"A":"1"}}`,
		`{"name":"dev"}GARBAGE`, `{}{}`, `{} `, "{}\n\t ", `[]`, `null`, `"x"`, `1`, ``, ` `, `{`, `{"name":`,
		`{"NAME":"x"}`, `{"name":"a","name":"b"}`, `{"unknown":1}`, `{"env":{"A":null}}`, `{"ttl":1}`,
		`{"max_sandboxes":3,"max_sandbox_cpu":"2","allowed_repos":["acme"]}`, `{"budget_usd":1e400}`,
		`{"budget_usd":-0.0}`, `{"models":["a","a"],"rate":"60/m","system_prompt":"\u0000"}`,
		`{"exit_code":0,"commit":"abc"}`, "{\"name\":\"\xff\xfe\"}", "\xef\xbb\xbf{}", `{"name":"x"}` + "\x00",
		`{"a":` + string(bytes.Repeat([]byte("["), 300)),
	} {
		f.Add([]byte(s))
	}
	const limit = 512
	targets := []func() any{
		func() any { return new(api.CreateSandbox) },
		func() any { return new(api.Guardrail) },
		func() any { return new(api.InferenceSettings) },
		func() any { return new(api.RunExit) },
		func() any { return new(api.CreateUser) },
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		for _, mk := range targets {
			v := mk()
			r := httptest.NewRequest("POST", "/", bytes.NewReader(body))
			r.Body = http.MaxBytesReader(httptest.NewRecorder(), r.Body, limit)
			err := decode(r, v)
			if err != nil {
				var ie *fault.Error
				tooLarge := errors.As(err, new(*http.MaxBytesError))
				switch {
				case tooLarge && len(body) <= limit:
					t.Fatalf("%T: a %d-byte body refused as over the %d-byte limit", v, len(body), limit)
				case !tooLarge && (!errors.As(err, &ie) || ie.Field != "body"):
					t.Fatalf("%T: refused with %v, not on body", v, err)
				}
				continue
			}
			if !json.Valid(body) {
				t.Fatalf("%T: took %q, which is not one JSON value", v, body)
			}
			again, err := json.Marshal(v)
			if err != nil {
				t.Fatalf("%T: %v", v, err)
			}
			back := mk()
			r = httptest.NewRequest("POST", "/", bytes.NewReader(again))
			if err := decode(r, back); err != nil {
				t.Fatalf("%T: took %q, but not %q, its own encoding: %v", v, body, again, err)
			}
			if !reflect.DeepEqual(v, back) {
				t.Fatalf("%T: %q reads as %+v, its encoding %q as %+v", v, body, v, again, back)
			}
		}
	})
}
