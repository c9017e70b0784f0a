// Package deploy holds the ways gatehouse is deployed, next to the tests
// that hold them to the binary they run: the container image's config
// (docker/, used by the Dockerfile at the repository's root), a two-replica
// cluster for docker compose (compose/), a systemd unit (systemd/) and a
// Helm chart (kubernetes/, rendered by a test in its own module so this
// one never needs Kubernetes' libraries). docs/deploy.md walks through
// each.
//
// It has no code: nothing imports it, and its tests import only the
// config and provider packages, to validate the configs as `gatehouse
// config check` does.
package deploy
