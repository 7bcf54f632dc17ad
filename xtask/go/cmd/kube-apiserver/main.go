// Command kube-apiserver is the Kubernetes API server, built from the k8s.io/kubernetes module at
// the version pinned in ../../go.mod. It exists so the project can build the API server with a
// plain `go build` (the upstream command package cannot be installed directly, see go.mod).
package main

import (
	"os"
	// Time zone data for CronJob schedules, as the upstream binary embeds it.
	_ "time/tzdata"

	"k8s.io/component-base/cli"
	// Registers the JSON log format (--logging-format=json).
	_ "k8s.io/component-base/logs/json/register"
	// Registers client-go and version metrics, as the upstream binary does.
	_ "k8s.io/component-base/metrics/prometheus/clientgo"
	_ "k8s.io/component-base/metrics/prometheus/version"
	"k8s.io/kubernetes/cmd/kube-apiserver/app"
)

func main() {
	os.Exit(cli.Run(app.NewAPIServerCommand()))
}
