// Command kube-controller-manager runs the core Kubernetes controllers (node IPAM, node lifecycle,
// garbage collection, ...), built from the k8s.io/kubernetes module at the version pinned in
// ../../go.mod, for the cluster in a box of ccm-testenv (docs/control-plane.md).
package main

import (
	"os"
	// Time zone data for CronJob schedules, like the released binary.
	_ "time/tzdata"

	"k8s.io/component-base/cli"
	// Registers the JSON log format (--logging-format=json).
	_ "k8s.io/component-base/logs/json/register"
	// Registers client-go, version and workqueue metrics, like the released binary.
	_ "k8s.io/component-base/metrics/prometheus/clientgo"
	_ "k8s.io/component-base/metrics/prometheus/version"
	_ "k8s.io/component-base/metrics/prometheus/workqueue"
	"k8s.io/kubernetes/cmd/kube-controller-manager/app"
)

func main() {
	os.Exit(cli.Run(app.NewControllerManagerCommand()))
}
