package history

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/cli-runtime/pkg/printers"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/rollout-guard/rollout-guard/revisions"
	"github.com/rollout-guard/rollout-guard/rollout/api/v1alpha1"
	"github.com/rollout-guard/rollout-guard/rollout/internal/core"
)

// untracked prints what the cluster itself keeps when the guard recorded nothing.
func (o *HistoryOptions) untracked(ctx context.Context, cl *core.Clients, set *core.RevisionSet) error {
	obj := set.Obj
	var sets []v1alpha1.MachineSetRevision
	if set.Kind.MachineSets != nil {
		var err error
		if sets, err = machineSetRevisions(ctx, o.Session, cl, set); err != nil {
			return err
		}
	}
	if o.PrintFlags.Data() {
		h := newRolloutHistory(set)
		h.MachineSets = sets
		return o.printHistory(h)
	}
	out := o.Session.IOStreams.Out
	fmt.Fprintf(out, "No revision history recorded for %s: no RolloutRevisions and no %s stamps. Is rollout-guard installed? It records every change from the moment it is.\n",
		core.Describe(obj, set.Kind), revisions.Prefix)
	now := o.Session.Now()
	if set.Kind.MachineSets != nil {
		if len(sets) == 0 {
			_, err := fmt.Fprintln(out, "The cluster keeps no MachineSets of it either.")
			return err
		}
		fmt.Fprintf(out, "What the cluster still has: the %s annotations of its MachineSets (Cluster API deletes old MachineSets, and records no author or cause):\n", clusterv1.RevisionAnnotation)
		w := printers.GetNewTabWriter(out)
		fmt.Fprintln(w, "REVISION\tMACHINESET\tVERSION\tINFRASTRUCTURE\tBOOTSTRAP\tREPLICAS\tAGE")
		for _, s := range sets {
			created, _ := time.Parse(time.RFC3339, s.CreatedAt)
			fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%d\t%s\n", core.OrNone(s.Revision), s.MachineSet, core.OrNone(s.Version), core.OrNone(s.Infrastructure), core.OrNone(s.Bootstrap), s.Replicas, age(now, created))
		}
		return w.Flush()
	}
	sum, err := summaryOf(set.Kind, set.Live)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "A %s keeps no history of its own; only the live revision is known:\n", set.Kind.GVK.Kind)
	w := printers.GetNewTabWriter(out)
	fmt.Fprintln(w, "REVISION\tVERSION\tINFRASTRUCTURE\tBOOTSTRAP\tAGE")
	fmt.Fprintf(w, "live\t%s\t%s\t%s\t%s\n", core.OrNone(sum.Version), core.OrNone(sum.Infrastructure), sum.Bootstrap, age(now, obj.GetCreationTimestamp().Time))
	return w.Flush()
}

// machineSetRevisions lists the MachineSets of set's object (a
// MachineDeployment) with their revision annotations, oldest revision first.
func machineSetRevisions(ctx context.Context, c *core.Session, cl *core.Clients, set *core.RevisionSet) ([]v1alpha1.MachineSetRevision, error) {
	md := set.Obj
	list := &clusterv1.MachineSetList{}
	if err := cl.Client.List(ctx, list, client.InNamespace(md.GetNamespace()), set.Kind.MachineSets(md)); err != nil {
		return nil, core.Call{Verb: "list", GR: schema.GroupResource{Group: clusterv1.GroupVersion.Group, Resource: "machinesets"}, Kind: "MachineSet",
			Namespace: md.GetNamespace(), Purpose: "show the history of " + core.Describe(md, set.Kind)}.Explain(err)
	}
	var out []v1alpha1.MachineSetRevision
	for _, ms := range list.Items {
		owned := len(ms.OwnerReferences) == 0
		for _, ref := range ms.OwnerReferences {
			if ref.UID == md.GetUID() {
				owned = true
			}
		}
		if !owned {
			continue
		}
		s := v1alpha1.MachineSetRevision{
			Revision:       ms.Annotations[clusterv1.RevisionAnnotation],
			MachineSet:     ms.Name,
			Version:        ms.Spec.Template.Spec.Version,
			Infrastructure: refString(ms.Spec.Template.Spec.InfrastructureRef),
			Bootstrap:      refString(ms.Spec.Template.Spec.Bootstrap.ConfigRef),
			CreatedAt:      ms.CreationTimestamp.UTC().Format(time.RFC3339),
		}
		if ms.Spec.Replicas != nil {
			s.Replicas = *ms.Spec.Replicas
		}
		out = append(out, s)
	}
	sort.SliceStable(out, func(i, j int) bool {
		a, errA := strconv.Atoi(out[i].Revision)
		b, errB := strconv.Atoi(out[j].Revision)
		if errA == nil && errB == nil && a != b {
			return a < b
		}
		return out[i].MachineSet < out[j].MachineSet
	})
	return out, nil
}

func refString(r clusterv1.ContractVersionedObjectReference) string {
	if !r.IsDefined() {
		return ""
	}
	return r.Kind + "/" + r.Name
}
