// Package deploy holds what a deployment runs besides drover's own image: the Temporal server's
// configuration (temporal/server.yaml, temporal/dynamicconfig.yaml) and the scripts that set up its Postgres databases
// (temporal/setup-schema.sh) and register drover's namespace (temporal/create-namespace.sh).
// docker-compose.yml mounts these files into Temporal's images; internal/testkit/temporalsrv runs the
// same files natively, so the tests exercise what the compose file deploys.
package deploy

import "embed"

// Temporal is the temporal/ folder: server.yaml, dynamicconfig.yaml, setup-schema.sh and
// create-namespace.sh.
//
//go:embed temporal
var Temporal embed.FS
