package main

import (
	"context"
	"sync"

	v1 "k8s.io/api/core/v1"
	cloudprovider "k8s.io/cloud-provider"
	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/legacyregistry"
)

// cloudCalls counts the calls the controllers make to the cloud's InstancesV2 and LoadBalancer interfaces, under the
// name and labels the Rust SDK uses for its own count (cloudprovider_api_requests_total{operation,
// result}), so that `cargo xtask e2e --scale` reads both CCMs' cloud calls the same way. The Go
// framework has no such metric; the fake's own call log is unexported.
var cloudCalls = metrics.NewCounterVec(
	&metrics.CounterOpts{
		Name:           "cloudprovider_api_requests_total",
		Help:           "Calls to the fake cloud's InstancesV2 and LoadBalancer methods, by operation and result (success or error).",
		StabilityLevel: metrics.ALPHA,
	},
	[]string{"operation", "result"},
)

func init() {
	legacyregistry.MustRegister(cloudCalls)
}

func countCall(operation string, err error) {
	result := "success"
	if err != nil {
		result = "error"
	}
	cloudCalls.WithLabelValues(operation, result).Inc()
}

// countingCloud is the fake cloud with its InstancesV2 calls counted.
type countingCloud struct {
	cloudprovider.Interface
}

// InstancesV2 returns the fake's InstancesV2, counted.
func (c countingCloud) InstancesV2() (cloudprovider.InstancesV2, bool) {
	inner, ok := c.Interface.InstancesV2()
	if !ok {
		return nil, false
	}
	return countingInstances{inner: inner}, true
}

// countingInstances counts each call, with the SDK's operation names.
type countingInstances struct {
	inner cloudprovider.InstancesV2
}

func (i countingInstances) InstanceExists(ctx context.Context, node *v1.Node) (bool, error) {
	exists, err := i.inner.InstanceExists(ctx, node)
	countCall("instance-exists", err)
	return exists, err
}

func (i countingInstances) InstanceShutdown(ctx context.Context, node *v1.Node) (bool, error) {
	shutdown, err := i.inner.InstanceShutdown(ctx, node)
	countCall("instance-shutdown", err)
	return shutdown, err
}

func (i countingInstances) InstanceMetadata(ctx context.Context, node *v1.Node) (*cloudprovider.InstanceMetadata, error) {
	metadata, err := i.inner.InstanceMetadata(ctx, node)
	countCall("instance-metadata-by-provider-id", err)
	return metadata, err
}

// LoadBalancer returns the fake's LoadBalancer, counted (`cargo xtask bench takeover` reads how many calls a
// starting controller makes).
func (c countingCloud) LoadBalancer() (cloudprovider.LoadBalancer, bool) {
	inner, ok := c.Interface.LoadBalancer()
	if !ok {
		return nil, false
	}
	return countingBalancer{inner: inner, mu: &balancerMu}, true
}

// balancerMu serializes the calls into the fake's load balancers: the fake writes its Balancers map without a
// lock, which --concurrent-service-syncs > 1 turns into "concurrent map writes". Its calls return at once, so
// the lock costs the controller nothing.
var balancerMu sync.Mutex

// countingBalancer counts each call but GetLoadBalancerName (a local computation), with the SDK's operation names.
type countingBalancer struct {
	inner cloudprovider.LoadBalancer
	mu    *sync.Mutex
}

func (b countingBalancer) GetLoadBalancer(ctx context.Context, clusterName string, service *v1.Service) (*v1.LoadBalancerStatus, bool, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	status, exists, err := b.inner.GetLoadBalancer(ctx, clusterName, service)
	countCall("get-load-balancer", err)
	return status, exists, err
}

func (b countingBalancer) GetLoadBalancerName(ctx context.Context, clusterName string, service *v1.Service) string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.inner.GetLoadBalancerName(ctx, clusterName, service)
}

func (b countingBalancer) EnsureLoadBalancer(ctx context.Context, clusterName string, service *v1.Service, nodes []*v1.Node) (*v1.LoadBalancerStatus, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	status, err := b.inner.EnsureLoadBalancer(ctx, clusterName, service, nodes)
	countCall("create", err)
	return status, err
}

func (b countingBalancer) UpdateLoadBalancer(ctx context.Context, clusterName string, service *v1.Service, nodes []*v1.Node) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	err := b.inner.UpdateLoadBalancer(ctx, clusterName, service, nodes)
	countCall("update", err)
	return err
}

func (b countingBalancer) EnsureLoadBalancerDeleted(ctx context.Context, clusterName string, service *v1.Service) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	err := b.inner.EnsureLoadBalancerDeleted(ctx, clusterName, service)
	countCall("delete", err)
	return err
}
