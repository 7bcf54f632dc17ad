// Command etcd runs a single-member etcd server (go.etcd.io/etcd/server/v3/embed, at the version
// go.mod selects through k8s.io/kubernetes) for the local test control plane. It takes only the
// few settings a throwaway loopback member needs and stops cleanly on SIGINT or SIGTERM.
package main

import (
	"flag"
	"fmt"
	"net/url"
	"os"
	"os/signal"
	"syscall"
	"time"

	"go.etcd.io/etcd/server/v3/embed"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintf(os.Stderr, "etcd: %v\n", err)
		os.Exit(1)
	}
}

func parseURL(flagName, raw string) (url.URL, error) {
	parsed, err := url.Parse(raw)
	if err != nil {
		return url.URL{}, fmt.Errorf("invalid --%s %q: %w", flagName, raw, err)
	}
	return *parsed, nil
}

func run() error {
	dataDir := flag.String("data-dir", "", "directory holding the member's data (required)")
	clientURL := flag.String("listen-client-url", "http://127.0.0.1:2379", "URL serving clients")
	peerURL := flag.String("listen-peer-url", "http://127.0.0.1:2380", "URL serving peers")
	name := flag.String("name", "default", "member name")
	logLevel := flag.String("log-level", "warn", "debug, info, warn or error")
	noFsync := flag.Bool("unsafe-no-fsync", false, "skip fsync (faster, loses data on a crash; for tests)")
	startTimeout := flag.Duration("start-timeout", time.Minute, "how long to wait for the member to become ready")
	flag.Parse()
	if *dataDir == "" {
		return fmt.Errorf("--data-dir is required")
	}

	client, err := parseURL("listen-client-url", *clientURL)
	if err != nil {
		return err
	}
	peer, err := parseURL("listen-peer-url", *peerURL)
	if err != nil {
		return err
	}

	cfg := embed.NewConfig()
	cfg.Name = *name
	cfg.Dir = *dataDir
	cfg.ListenClientUrls = []url.URL{client}
	cfg.AdvertiseClientUrls = []url.URL{client}
	cfg.ListenPeerUrls = []url.URL{peer}
	cfg.AdvertisePeerUrls = []url.URL{peer}
	cfg.InitialCluster = cfg.InitialClusterFromName(cfg.Name)
	cfg.LogLevel = *logLevel
	cfg.LogOutputs = []string{"stderr"}
	cfg.UnsafeNoFsync = *noFsync

	server, err := embed.StartEtcd(cfg)
	if err != nil {
		return fmt.Errorf("starting etcd: %w", err)
	}
	defer server.Close()

	select {
	case <-server.Server.ReadyNotify():
	case <-time.After(*startTimeout):
		server.Server.Stop()
		return fmt.Errorf("etcd did not become ready within %s", *startTimeout)
	}
	fmt.Fprintf(os.Stderr, "etcd: ready, serving clients on %s\n", client.String())

	signals := make(chan os.Signal, 1)
	signal.Notify(signals, syscall.SIGINT, syscall.SIGTERM)
	select {
	case sig := <-signals:
		fmt.Fprintf(os.Stderr, "etcd: received %s, stopping\n", sig)
		return nil
	case err := <-server.Err():
		return fmt.Errorf("etcd stopped: %w", err)
	}
}
