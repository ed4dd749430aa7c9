// Package deploy holds the tests of the deployment artefacts beside it:
// the container image definitions (factory-image.yaml, the spec of the
// image builder makes from the certified base, whose test is
// TestFactoryImage in cmd/builder; container/), the systemd units
// (systemd/), the Helm chart (helm/) and the Prometheus alerting rules
// (prometheus/), each judged by its own tool (systemd-analyze, helm,
// promtool). docs/factory-deployment.md says how to use them.
package deploy
