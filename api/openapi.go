package api

import (
	_ "embed"
	"net/http"
)

// openapiJSON is the OpenAPI 3.1 document of the API, served at /api/v1/openapi.json. A test
// holds it to the routes the server registers.
//
//go:embed openapi.json
var openapiJSON []byte

// OpenAPI returns the OpenAPI 3.1 document of the API.
func OpenAPI() []byte { return append([]byte(nil), openapiJSON...) }

func (s *Server) openapi(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(openapiJSON)
}
