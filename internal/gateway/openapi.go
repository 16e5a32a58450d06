package gateway

import (
	_ "embed"
	"net/http"

	"berth.dev/berth/internal/account"
)

// openAPI describes every route of routes(); a test keeps the two in step.
//
//go:embed openapi.yaml
var openAPI []byte

func serveOpenAPI(w http.ResponseWriter, _ *http.Request, _ account.Principal) {
	w.Header().Set("Content-Type", "application/yaml")
	_, _ = w.Write(openAPI)
}
