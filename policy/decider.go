package policy

import (
	"context"

	controlplanev1 "sigs.k8s.io/cluster-api/api/controlplane/kubeadm/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/rollout-guard/rollout-guard/revisions"
	"github.com/rollout-guard/rollout-guard/skew"
)

// Decider judges a change as a Policy does: a Policy itself, or one that
// chooses between Policies by how fresh their reads are (the guard's
// webhooks.FreshPolicy).
type Decider interface {
	// Decide judges the change of oldObj (nil on create) into newObj
	// (Policy.Decide).
	Decide(ctx context.Context, oldObj, newObj client.Object) (skew.Decision, []string, error)
	// RevertedRun says what a control plane had run before the bump that
	// newKCP reverts (Policy.RevertedRun).
	RevertedRun(ctx context.Context, oldKCP, newKCP *controlplanev1.KubeadmControlPlane) (*revisions.HighestRun, error)
}

var _ Decider = Policy{}
