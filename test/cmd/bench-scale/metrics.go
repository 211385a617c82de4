package main

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/rollout-guard/rollout-guard/test/framework"
)

// metricsToken returns a bearer token allowed to read the guard's metrics
// (the shipped rollout-guard-metrics-reader ClusterRole).
func metricsToken(ctx context.Context, c client.Client) (string, error) {
	return framework.MetricsReaderToken(ctx, c, "bench-metrics", time.Hour)
}

// meanLatencies says, per webhook path, how many requests the guard
// answered between two scrapes and their mean latency.
func meanLatencies(before, after framework.WebhookLatencies) string {
	var paths []string
	for p := range after {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	var parts []string
	for _, p := range paths {
		n := after[p][1] - before[p][1]
		if n <= 0 {
			continue
		}
		mean := (after[p][0] - before[p][0]) / n
		parts = append(parts, fmt.Sprintf("%s %.0f requests mean %.2f ms", strings.TrimPrefix(p, "/"), n, mean*1000))
	}
	if len(parts) == 0 {
		return "no admission request answered"
	}
	return strings.Join(parts, "; ")
}

// waitReconciled waits until the guard's history reconcilers have
// reconciled at least objects items and have nothing queued: the boot pass
// that records the live revision of every MachineDeployment and
// KubeadmControlPlane is over.
func waitReconciled(ctx context.Context, url, token string, objects int, timeout time.Duration) (time.Duration, error) {
	begin := time.Now()
	var last framework.HistoryReconciles
	for time.Since(begin) < timeout {
		st, err := framework.ScrapeHistoryReconciles(ctx, url, token)
		if err == nil {
			last = st
			if st.Done >= float64(objects) && st.Queued == 0 {
				return time.Since(begin), nil
			}
		}
		select {
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-time.After(2 * time.Second):
		}
	}
	return 0, fmt.Errorf("boot reconciliation not over after %s: %.0f of %d reconciled, %.0f queued", timeout, last.Done, objects, last.Queued)
}
