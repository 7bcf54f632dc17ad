// Command kube-scheduler is the Kubernetes scheduler, built from the k8s.io/kubernetes module at the
// version pinned in ../../go.mod, for the cluster in a box of ccm-testenv (docs/control-plane.md).
package main

import (
	"os"

	"k8s.io/component-base/cli"
	// Registers the JSON log format (--logging-format=json).
	_ "k8s.io/component-base/logs/json/register"
	// Registers client-go and version metrics, like the released binary.
	_ "k8s.io/component-base/metrics/prometheus/clientgo"
	_ "k8s.io/component-base/metrics/prometheus/version"
	"k8s.io/kubernetes/cmd/kube-scheduler/app"
)

func main() {
	os.Exit(cli.Run(app.NewSchedulerCommand()))
}
