// Package docs embeds the documents the binary serves: the OpenAPI
// description of gatehouse's HTTP API, rendered by the dashboard's API
// reference page.
package docs

import _ "embed"

//go:embed openapi.yaml
var openapi string

// OpenAPI returns openapi.yaml, the reference of the /v1 and /admin APIs
// (a copy: the embedded text stays as built).
func OpenAPI() []byte { return []byte(openapi) }
