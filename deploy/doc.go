// Package deploy holds no code of its own: its tests check the deployment
// files beside them (kubernetes/, systemd/, grafana/, prometheus/'s alert
// rules, and the repository's docker-compose.yml and Dockerfile) against
// the daemon they deploy, the flaked binary built from the main module and
// run on loopback (and, for the alert rules, promtool and a real
// Prometheus scraping it).
//
// It is a module of its own, as bench/ is, so the Kubernetes and Prometheus
// libraries its tests decode with never enter the main module.
package deploy
