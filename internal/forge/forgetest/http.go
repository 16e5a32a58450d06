package forgetest

import (
	"encoding/json"
	"net/http"
	"testing"
)

// writeJSON answers v as JSON with status.
func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v) // the client hung up: nothing to do
}

// unexpected fails the test for a call the stand-in does not implement:
// berth makes no such call to the real forge.
func unexpected(t testing.TB, forge string, w http.ResponseWriter, r *http.Request) {
	t.Errorf("forgetest: %s stand-in: unexpected call %s %s", forge, r.Method, r.URL.RequestURI())
	writeJSON(w, http.StatusNotFound, map[string]string{"message": "Not Found"})
}

// decode reads r's JSON body into v, failing the test when it is not JSON
// with exactly v's fields: berth sends nothing the stand-ins do not know.
func decode(t testing.TB, forge string, r *http.Request, v any) bool {
	if ct := r.Header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("forgetest: %s stand-in: %s %s: Content-Type %q, want application/json", forge, r.Method, r.URL.Path, ct)
	}
	dec := json.NewDecoder(http.MaxBytesReader(nil, r.Body, 1<<20))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		t.Errorf("forgetest: %s stand-in: %s %s: body: %v", forge, r.Method, r.URL.Path, err)
		return false
	}
	return true
}
