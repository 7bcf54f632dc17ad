// Command fake-cloud-controller-manager is the reference cloud-controller-manager of
// k8s.io/cloud-provider, running its "fake" cloud, configured so every controller can do its
// work: it is the Go peer for side-by-side comparisons with the Rust CCM.
//
// Left at its zero value the fake cloud is unusable: with InstancesV2 off and no metadata it
// initializes nodes with providerID "fake://" and nothing else, with ExistsByProviderID false the
// lifecycle controller deletes every NotReady node, without ExternalIP load balancers get the
// invalid ingress IP "<nil>", and with a nil RouteMap the route controller panics. This command
// sets all of them, and derives per-node metadata from the node name.
package main

import (
	"context"
	"fmt"
	"hash/fnv"
	"io"
	"net"
	"os"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	cloudprovider "k8s.io/cloud-provider"
	"k8s.io/cloud-provider/app"
	"k8s.io/cloud-provider/app/config"
	"k8s.io/cloud-provider/fake"
	"k8s.io/cloud-provider/names"
	"k8s.io/cloud-provider/options"
	"k8s.io/component-base/cli"
	cliflag "k8s.io/component-base/cli/flag"
	// Registers the JSON log format and client-go/version metrics, as upstream commands do.
	_ "k8s.io/component-base/logs/json/register"
	_ "k8s.io/component-base/metrics/prometheus/clientgo"
	_ "k8s.io/component-base/metrics/prometheus/version"
	"k8s.io/klog/v2"
)

// providerName is the name passed as --cloud-provider.
const providerName = "fake"

// settings of the fake cloud, set from the "fake cloud" flags.
type settings struct {
	zone         string
	region       string
	instanceType string
	externalIP   string
}

func (s *settings) addFlags(fss *cliflag.NamedFlagSets) {
	fs := fss.FlagSet("fake cloud")
	fs.StringVar(&s.zone, "fake-zone", "zone-a", "zone reported for every instance (topology.kubernetes.io/zone)")
	fs.StringVar(&s.region, "fake-region", "region-1", "region reported for every instance (topology.kubernetes.io/region)")
	fs.StringVar(&s.instanceType, "fake-instance-type", "fake-instance", "instance type reported for every instance")
	fs.StringVar(&s.externalIP, "fake-external-ip", "192.0.2.1", "ingress IP reported for every load balancer")
}

// internalIP derives a stable 10.x.y.z address from a node name.
func internalIP(nodeName string) string {
	h := fnv.New32a()
	_, _ = h.Write([]byte(nodeName))
	sum := h.Sum32()
	// Last octet in 1..254.
	return fmt.Sprintf("10.%d.%d.%d", (sum>>16)&0xff, (sum>>8)&0xff, 1+(sum&0xff)%254)
}

func (s *settings) newCloud() (*fake.Cloud, error) {
	ip := net.ParseIP(s.externalIP)
	if ip == nil {
		return nil, fmt.Errorf("--fake-external-ip %q is not an IP address", s.externalIP)
	}
	cloud := &fake.Cloud{
		Provider:           providerName,
		EnableInstancesV2:  true,
		Exists:             true,
		ExistsByProviderID: true,
		ExternalIP:         ip,
		RouteMap:           map[string]*fake.Route{},
		Balancers:          map[string]fake.Balancer{},
		Zone:               cloudprovider.Zone{FailureDomain: s.zone, Region: s.region},
	}
	cloud.OverrideInstanceMetadata = func(_ context.Context, node *v1.Node) (*cloudprovider.InstanceMetadata, error) {
		return &cloudprovider.InstanceMetadata{
			ProviderID:   providerName + "://" + node.Name,
			InstanceType: s.instanceType,
			NodeAddresses: []v1.NodeAddress{
				{Type: v1.NodeInternalIP, Address: internalIP(node.Name)},
				{Type: v1.NodeHostName, Address: node.Name},
			},
			Zone:   s.zone,
			Region: s.region,
		}, nil
	}
	return cloud, nil
}

func main() {
	ccmOptions, err := options.NewCloudControllerManagerOptions()
	if err != nil {
		klog.Fatalf("unable to initialize command options: %v", err)
	}
	cloudSettings := &settings{}
	fss := cliflag.NamedFlagSets{}
	cloudSettings.addFlags(&fss)

	cloudprovider.RegisterCloudProvider(providerName, func(io.Reader) (cloudprovider.Interface, error) {
		cloud, err := cloudSettings.newCloud()
		if err != nil {
			return nil, err
		}
		return countingCloud{Interface: cloud}, nil
	})

	initializeCloud := func(completed *config.CompletedConfig) cloudprovider.Interface {
		shared := completed.ComponentConfig.KubeCloudShared.CloudProvider
		cloud, err := cloudprovider.InitCloudProvider(shared.Name, shared.CloudConfigFile)
		if err != nil {
			klog.Fatalf("cloud provider could not be initialized: %v", err)
		}
		if cloud == nil {
			klog.Fatalf("cloud provider %q is not known: use --cloud-provider=%s", shared.Name, providerName)
		}
		return cloud
	}

	command := app.NewCloudControllerManagerCommand(
		ccmOptions, initializeCloud, app.DefaultInitFuncConstructors, names.CCMControllerAliases(), fss, wait.NeverStop)
	os.Exit(cli.Run(command))
}
