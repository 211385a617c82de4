package status

import (
	"fmt"
	"strings"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/rollout-guard/rollout-guard/rollout/internal/core"
)

// A MachineDeployment with the OnDelete strategy replaces a Machine only
// when someone deletes it: once its controller has done all it does by
// itself (the new MachineSet created, every Machine deleted so far
// replaced, ready and up to date), the old Machines that remain wait for a
// person, not for time. status says so at once, with a verdict of its
// own, instead of waiting out the progress deadline.

// ExitWaitingForDeletion: a MachineDeployment with the OnDelete strategy
// waits for its old machines to be deleted by hand.
const ExitWaitingForDeletion = 8

// PhaseWaitingForDeletion: the rollout of a MachineDeployment with the
// OnDelete strategy waits for its old machines to be deleted.
const PhaseWaitingForDeletion = "WaitingForDeletion"

// onDeleteStrategy reports whether obj is a MachineDeployment with the
// OnDelete rollout strategy.
func onDeleteStrategy(obj client.Object) bool {
	md, ok := obj.(*clusterv1.MachineDeployment)
	return ok && md.Spec.Rollout.Strategy.Type == clusterv1.OnDeleteMachineDeploymentStrategyType
}

// waitingForDeletion returns the old Machines that a MachineDeployment with
// the OnDelete strategy waits for someone to delete, by name; nil while
// its controller still has something to do (or the rollout is complete):
// the generation not observed, the current MachineSet not known, a Machine
// being deleted, fewer or more Machines than spec.replicas, or a new
// Machine not ready or not up to date.
func waitingForDeletion(obj client.Object, s StatusReport, sets *machineSetFacts) []string {
	if !onDeleteStrategy(obj) || s.Complete || !s.Observed || sets == nil || sets.newName == "" || int32(len(s.Machines)) != s.Replicas {
		return nil
	}
	var old []string
	for _, m := range s.Machines {
		switch {
		case m.Deleting:
			return nil
		case m.Old:
			old = append(old, m.Name)
		case !m.Ready || !m.UpToDate:
			return nil
		}
	}
	return old
}

// onDeleteSummary is the summary of a rollout waiting for its old machines
// to be deleted.
func onDeleteSummary(n int) string {
	return fmt.Sprintf("waiting for %d old %s to be deleted (OnDelete strategy)", n, core.Plural(n, "machine", "machines"))
}

// onDeleteVerdict is the verdict of a rollout waiting for its old machines
// to be deleted: what to delete, and how.
func onDeleteVerdict(s StatusReport, namespace string) error {
	return core.StatusError{Code: ExitWaitingForDeletion, Msg: fmt.Sprintf(
		"%s is %s: Cluster API replaces a machine of it only when the machine is deleted; delete them (kubectl delete machine -n %s %s), then run status again",
		s.Object, onDeleteSummary(len(s.OldToDelete)), namespace, strings.Join(s.OldToDelete, " "))}
}
