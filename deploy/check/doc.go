// Package check holds the checks of kmirror's deployment files (deploy/):
// the Grafana dashboard's and the Prometheus rules' queries, parsed with
// Prometheus's own packages and checked against the metrics the daemon
// exports (deploy/metrics.txt); the Kubernetes manifests and the Helm
// chart, decoded strictly with the Kubernetes API types; the Dockerfile,
// parsed as BuildKit parses it.
//
// It is its own Go module, outside go.work, so that Prometheus, Helm and
// the Kubernetes libraries never enter the daemon's module graph. Run it
// with scripts/deploy-check.sh (make deploy-check).
package check
