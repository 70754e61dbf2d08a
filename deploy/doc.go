// Package deploy holds refuel's deployment files: docker-compose.yaml and
// its Dockerfile, Kubernetes manifests, the Grafana dashboard and the
// Prometheus configuration and alerts. Its tests parse every file into
// the types its tool reads, so a typo fails CI rather than a deploy.
package deploy
