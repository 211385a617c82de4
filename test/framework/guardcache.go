package framework

import (
	"context"
	"fmt"
	"strings"
	"time"

	controlplanev1 "sigs.k8s.io/cluster-api/api/controlplane/kubeadm/v1beta2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// WaitGuardSees waits until the guard judges a cluster with all of its
// objects in its cache. The guard reads through a cache, so right after a
// test creates objects it may not see them yet. Two server-side dry-run
// probes only a guard that sees everything refuses for the right reasons:
// md at v1.99.0 (needs the Cluster and kcp: WorkerNewerThanControlPlane),
// and kcp at v1.99.0, whose refusal must name md and every worker Machine in
// machines as left too old. A refusal names a pool's Machines with the pool
// and at most skew.NamesShown of them by name, so machines should be
// Machines of no pool, or the first of their pool by name. Dry-runs record
// nothing.
func (e *Environment) WaitGuardSees(ctx context.Context, md *clusterv1.MachineDeployment, kcp *controlplanev1.KubeadmControlPlane, machines ...string) error {
	if err := e.waitRefused(ctx, "the Cluster and control plane in the guard's cache", func() error {
		fresh := md.DeepCopy()
		if err := e.Client.Get(ctx, client.ObjectKeyFromObject(fresh), fresh); err != nil {
			return err
		}
		fresh.Spec.Template.Spec.Version = "v1.99.0"
		return e.Client.Update(ctx, fresh, client.DryRunAll)
	}, "[rule WorkerNewerThanControlPlane]"); err != nil {
		return err
	}
	// "...: MachineDeployment md-0 runs ..." alone, or "...: MachineDeployment
	// md-0 and 3 of its Machines (...) run ..." with its Machines.
	wants := []string{": MachineDeployment " + md.Name + " "}
	wants = append(wants, machines...)
	return e.waitRefused(ctx, "the workers in the guard's cache", func() error {
		fresh := kcp.DeepCopy()
		if err := e.Client.Get(ctx, client.ObjectKeyFromObject(fresh), fresh); err != nil {
			return err
		}
		fresh.Spec.Version = "v1.99.0"
		return e.Client.Update(ctx, fresh, client.DryRunAll)
	}, wants...)
}

// waitRefused retries do, for up to 15 s, until its error contains every want.
func (e *Environment) waitRefused(ctx context.Context, what string, do func() error, wants ...string) error {
	deadline := time.Now().Add(15 * time.Second)
	var last error
	for {
		last = do()
		if last != nil && containsAll(last.Error(), wants) {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("waiting for %s: last answer %v", what, last)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for %s: %w", what, ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func containsAll(s string, subs []string) bool {
	for _, sub := range subs {
		if !strings.Contains(s, sub) {
			return false
		}
	}
	return true
}
