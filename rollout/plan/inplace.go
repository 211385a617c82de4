package plan

import (
	"context"
	"slices"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	controlplanev1 "sigs.k8s.io/cluster-api/api/controlplane/kubeadm/v1beta2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	runtimev1 "sigs.k8s.io/cluster-api/api/runtime/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/rollout-guard/rollout-guard/revisions"
	"github.com/rollout-guard/rollout-guard/rollout/api/v1alpha1"
	"github.com/rollout-guard/rollout-guard/rollout/internal/core"
)

// With its InPlaceUpdates feature gate, Cluster API first asks the Runtime
// Extensions registered for a hook whether a machine to be rolled out can
// be updated in place instead: CanUpdateMachine for a control plane's
// machine, CanUpdateMachineSet for a MachineDeployment's. Whether an
// extension accepts depends on the change and the extension, so plan cannot
// tell: a machine it would replace for its content is "updated in place if
// the extension accepts, otherwise replaced", naming the handlers. Restarts
// (spec.rollout.after) and OnDelete pools are always replaced. The gate
// itself is a flag of Cluster API's controllers, which plan cannot read; an
// extension is registered (its handlers listed in its ExtensionConfig's
// status) only where Cluster API runs the Runtime SDK.

// The hooks Cluster API asks before an in-place update.
const (
	hookCanUpdateMachine    = "CanUpdateMachine"
	hookCanUpdateMachineSet = "CanUpdateMachineSet"
)

// inPlaceHook is the hook Cluster API asks before it updates a machine of
// obj in place, "" when it never does (an OnDelete MachineDeployment, other
// kinds).
func inPlaceHook(obj client.Object) string {
	switch o := obj.(type) {
	case *controlplanev1.KubeadmControlPlane:
		return hookCanUpdateMachine
	case *clusterv1.MachineDeployment:
		if o.Spec.Rollout.Strategy.Type == clusterv1.OnDeleteMachineDeploymentStrategyType {
			return ""
		}
		return hookCanUpdateMachineSet
	}
	return ""
}

// inPlaceFor is what a machine planned with rollout (the fields that roll
// it out) may be updated in place by: the handlers, when it is replaced for
// its content.
func (ch machineChange) inPlaceFor(rollout []revisions.Change) string {
	if len(rollout) == 0 {
		return ""
	}
	return ch.inPlaceIfAccepted
}

// inPlaceHandlers returns the handlers of the registered Runtime Extensions
// that Cluster API asks before it updates a machine of obj in place, by
// name and comma-separated; "" when there is none, when ExtensionConfigs
// are not served, or when the user may not list them. Any other failure to
// read them is warned about, not an error: the plan then says what it says
// without extensions.
func (c planSession) inPlaceHandlers(ctx context.Context, cl *core.Clients, obj client.Object) string {
	hook := inPlaceHook(obj)
	if hook == "" {
		return ""
	}
	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(runtimev1.GroupVersion.WithKind("ExtensionConfigList"))
	if err := cl.Client.List(ctx, list); err != nil {
		// Not served: no Runtime SDK. Forbidden: ExtensionConfigs are
		// cluster-wide, and a user with rights in the clusters' namespace
		// only gets the plan without them, as documented.
		if !apimeta.IsNoMatchError(err) && !apierrors.IsForbidden(err) {
			c.Warnf("cannot list ExtensionConfigs (%v): whether Cluster API would update machines of %s in place is not checked", core.OneLine(err.Error()), objectName(obj))
		}
		return ""
	}
	var nsLabels labels.Set
	nsRead := false
	var names []string
	for _, u := range list.Items {
		ext := &runtimev1.ExtensionConfig{}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, ext); err != nil {
			c.Warnf("ExtensionConfig %s cannot be read (%v): it is left out of the plan", u.GetName(), err)
			continue
		}
		if sel := ext.Spec.NamespaceSelector; sel != nil && (len(sel.MatchLabels) > 0 || len(sel.MatchExpressions) > 0) {
			if !nsRead {
				nsLabels, nsRead = c.namespaceLabels(ctx, cl, obj.GetNamespace()), true
			}
			if nsLabels != nil && !selects(sel, nsLabels) {
				continue
			}
		}
		for _, h := range ext.Status.Handlers {
			if h.RequestHook.Hook == hook {
				names = append(names, h.Name)
			}
		}
	}
	sort.Strings(names)
	return strings.Join(names, ", ")
}

// namespaceLabels returns the labels of namespace, nil when it cannot be
// read (then every ExtensionConfig counts, whatever its namespaceSelector).
func (c planSession) namespaceLabels(ctx context.Context, cl *core.Clients, namespace string) labels.Set {
	ns := &corev1.Namespace{}
	if err := cl.Client.Get(ctx, client.ObjectKey{Name: namespace}, ns); err != nil {
		return nil
	}
	return labels.Set(ns.Labels)
}

// selects reports whether sel matches set; a selector that does not parse
// matches (the extension is counted rather than missed).
func selects(sel *metav1.LabelSelector, set labels.Set) bool {
	s, err := metav1.LabelSelectorAsSelector(sel)
	return err != nil || s.Matches(set)
}

// inPlaceText says what becomes of a machine that handlers may update in
// place.
func inPlaceText(handlers string) string {
	word := "extension"
	if strings.Contains(handlers, ",") {
		word = "one of the extensions"
	}
	return "updated in place if " + word + " " + handlers + " accepts (Cluster API's InPlaceUpdates), otherwise replaced"
}

// inPlaceCandidates counts the machines of p to be replaced that Cluster
// API first offers to extensions for an in-place update, and names those
// extensions' handlers.
func inPlaceCandidates(p *v1alpha1.RolloutPlan) (int, string) {
	n := 0
	var names []string
	for _, op := range p.Objects {
		for _, m := range op.Machines {
			if m.Action != v1alpha1.ActionReplace || m.InPlaceIfAccepted == "" {
				continue
			}
			n++
			for _, h := range strings.Split(m.InPlaceIfAccepted, ", ") {
				if !slices.Contains(names, h) {
					names = append(names, h)
				}
			}
		}
	}
	sort.Strings(names)
	return n, strings.Join(names, ", ")
}
