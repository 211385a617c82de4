package policy

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	controlplanev1 "sigs.k8s.io/cluster-api/api/controlplane/kubeadm/v1beta2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/rollout-guard/rollout-guard/kinds"
	"github.com/rollout-guard/rollout-guard/revisions"
	"github.com/rollout-guard/rollout-guard/skew"
)

// ClusterNameField is the cache index, on MachineDeployments, MachinePools and
// Machines, of spec.clusterName. It lets the guard list one cluster's workers
// without relying on labels that only Cluster API's defaulting webhook sets.
const ClusterNameField = "spec.clusterName"

// ContractReadTimeout bounds the read of a control plane other than
// KubeadmControlPlane, so a kind the guard may not read costs one warning,
// not an admission timeout.
const ContractReadTimeout = 2 * time.Second

// AggregateToControlPlanesLabel is the label of ClusterRoles whose rules the
// guard's rollout-guard-control-planes ClusterRole aggregates (config/rbac).
const AggregateToControlPlanesLabel = "rollout-guard.io/aggregate-to-control-planes"

// controlPlaneLabel marks control-plane Machines.
const controlPlaneLabel = clusterv1.MachineControlPlaneLabel

// clusterNameLabel is the label Cluster API puts on objects of a cluster.
const clusterNameLabel = clusterv1.ClusterNameLabel

// etcdImageTagField is the field path of a KubeadmControlPlane's explicit etcd version.
const etcdImageTagField = "spec.kubeadmConfigSpec.clusterConfiguration.etcd.local.imageTag"

// factReader gathers, from a cache-backed reader, the facts of a cluster that a
// change is judged against.
type factReader struct {
	reader  client.Reader
	mapper  meta.RESTMapper
	indexed bool
	// listed are the control-plane kinds the guard was told to police.
	listed []schema.GroupKind
	// live reads from the API server what reader may not hold yet (see
	// Policy.Live); nil when reader is the only one.
	live client.Reader
}

// notListed is the way out a warning about an unreadable control plane adds
// when its kind is not among those the guard polices.
func (f factReader) notListed(gk schema.GroupKind) string {
	if slices.Contains(f.listed, gk) {
		return ""
	}
	return fmt.Sprintf("; to have it policed, add %s to the guard's %s", gk.Kind+"."+gk.Group, ControlPlaneKindsFlag)
}

// getOptions are the options of reads of typed objects: from the guard's
// cache (indexed), which the policy only reads, without a deep copy.
func (f factReader) getOptions() []client.GetOption {
	if f.indexed {
		return []client.GetOption{client.UnsafeDisableDeepCopy}
	}
	return nil
}

// controlPlaneOf returns the state of a cluster's control plane. Any control
// plane following Cluster API's contract (spec.version, status.version) works;
// KubeadmControlPlane also gives status.versions. It returns nil and a reason
// when the control plane cannot be found.
func (f factReader) controlPlaneOf(ctx context.Context, namespace, clusterName string) (*skew.ControlPlaneState, string, error) {
	cluster := &clusterv1.Cluster{}
	if err := f.reader.Get(ctx, types.NamespacedName{Namespace: namespace, Name: clusterName}, cluster, f.getOptions()...); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, fmt.Sprintf("Cluster %s/%s not found", namespace, clusterName), nil
		}
		return nil, "", fmt.Errorf("reading Cluster %s/%s: %w", namespace, clusterName, err)
	}
	ref := cluster.Spec.ControlPlaneRef
	if ref.Name == "" {
		return nil, fmt.Sprintf("Cluster %s/%s has no spec.controlPlaneRef", namespace, clusterName), nil
	}
	if ref.APIGroup == controlplanev1.GroupVersion.Group && ref.Kind == "KubeadmControlPlane" {
		kcp := &controlplanev1.KubeadmControlPlane{}
		if err := f.reader.Get(ctx, types.NamespacedName{Namespace: namespace, Name: ref.Name}, kcp, f.getOptions()...); err != nil {
			if apierrors.IsNotFound(err) {
				return nil, fmt.Sprintf("KubeadmControlPlane %s/%s of Cluster %s not found", namespace, ref.Name, clusterName), nil
			}
			return nil, "", fmt.Errorf("reading KubeadmControlPlane %s/%s: %w", namespace, ref.Name, err)
		}
		return &skew.ControlPlaneState{
			Kind:            "KubeadmControlPlane",
			Name:            kcp.Name,
			Version:         skew.ReadVersion(kcp.Spec.Version),
			RunningVersions: kcpRunningVersions(kcp),
		}, "", nil
	}
	return f.contractControlPlane(ctx, namespace, ref)
}

// contractControlPlane reads a control plane of any provider through the
// fields of Cluster API's control-plane contract: spec.version and
// status.versions / status.version.
func (f factReader) contractControlPlane(ctx context.Context, namespace string, ref clusterv1.ContractVersionedObjectReference) (*skew.ControlPlaneState, string, error) {
	id := fmt.Sprintf("%s %s/%s", ref.Kind, namespace, ref.Name)
	if f.mapper == nil {
		return nil, fmt.Sprintf("control plane %s cannot be read: no REST mapper", id), nil
	}
	gk := schema.GroupKind{Group: ref.APIGroup, Kind: ref.Kind}
	mapping, err := f.mapper.RESTMapping(gk)
	if err != nil {
		return nil, fmt.Sprintf("control plane %s: kind not served (%v)", id, err), nil
	}
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(mapping.GroupVersionKind)
	// Reading a provider's control plane through the cache starts an informer
	// for its kind on first use; without read access to that kind it would
	// never fill and the read would wait for the whole admission timeout.
	// Bound the wait and say what is missing instead.
	readCtx, cancel := context.WithTimeout(ctx, ContractReadTimeout)
	defer cancel()
	if err := f.reader.Get(readCtx, types.NamespacedName{Namespace: namespace, Name: ref.Name}, u); err != nil {
		switch {
		case apierrors.IsNotFound(err):
			return nil, fmt.Sprintf("control plane %s not found", id), nil
		case readCtx.Err() != nil && ctx.Err() == nil, apierrors.IsForbidden(err):
			return nil, fmt.Sprintf("control plane %s could not be read within %s (%v); grant rollout-guard read access to %s through a ClusterRole labelled %s%s",
				id, ContractReadTimeout, err, mapping.Resource.GroupResource(), AggregateToControlPlanesLabel+"=true", f.notListed(gk)), nil
		}
		return nil, "", fmt.Errorf("reading control plane %s: %w", id, err)
	}
	return &skew.ControlPlaneState{
		Kind:            ref.Kind,
		Name:            ref.Name,
		Version:         skew.ReadVersion(contractVersion(u)),
		RunningVersions: contractRunningVersions(u),
	}, "", nil
}

// kcpRead is a stored KubeadmControlPlane as one decision reads it: each
// version it holds read once, and what it has run worked out once, when
// first asked.
type kcpRead struct {
	obj *controlplanev1.KubeadmControlPlane
	// version is its spec.version.
	version skew.Version
	// etcdTag is the etcd image tag it pins; unset for kubeadm's default.
	etcdTag skew.EtcdVersion
	// running are the versions its machines run (kcpRunningVersions).
	running []skew.Version
	// ran is what it has run, once asked (see run).
	ran *kcpRun
}

// kcpRun is what a control plane has run: its stamp, which also says what
// ran before its latest revision, and the stamp raised by what the control
// plane's spec runs (as HighestRunOf), as the rules take it.
type kcpRun struct {
	stamp   revisions.HighestRun
	history skew.History
}

// readKCP reads the versions of a stored KubeadmControlPlane.
func readKCP(kcp *controlplanev1.KubeadmControlPlane) *kcpRead {
	return &kcpRead{
		obj:     kcp,
		version: skew.ReadVersion(kcp.Spec.Version),
		etcdTag: skew.ReadEtcdVersion(etcdImageTag(kcp)),
		running: kcpRunningVersions(kcp),
	}
}

// run returns what the control plane has run, worked out on first use.
func (k *kcpRead) run() *kcpRun {
	if k.ran == nil {
		stamp := stampedHighest(k.obj)
		k.ran = &kcpRun{stamp: stamp, history: stamp.HistoryWith(k.runs(), revisions.StampsOf(k.obj).Revision)}
	}
	return k.ran
}

// runs returns what the control plane's spec runs.
func (k *kcpRead) runs() revisions.Run {
	run, _ := revisions.KubeadmRun(k.version, k.etcdTag)
	return run
}

// kcpRunningVersions reads the versions a KubeadmControlPlane's machines run.
func kcpRunningVersions(kcp *controlplanev1.KubeadmControlPlane) []skew.Version {
	var out []skew.Version
	for _, v := range kcp.Status.Versions {
		out = readOnce(out, v.Version)
	}
	return readOnce(out, kcp.Status.Version) //nolint:staticcheck // still the only field on older controllers
}

// workerFilter says which workers of a cluster workersOf lists.
type workerFilter bool

const (
	// allWorkers lists every worker.
	allWorkers workerFilter = false
	// withoutTopologyOwned leaves out the pools and Machines a Cluster's
	// topology owns (label topology.cluster.x-k8s.io/owned): the topology
	// controller upgrades them along a topology version change.
	withoutTopologyOwned workerFilter = true
)

// skips reports whether a worker with these labels is left out.
func (w workerFilter) skips(labels map[string]string) bool {
	_, owned := labels[clusterv1.ClusterTopologyOwnedLabel]
	return bool(w) && owned
}

// workersOf lists every worker of a cluster that runs a kubelet against its
// control plane: MachineDeployments and MachinePools by their spec version,
// and worker Machines by the kubelet version their node reports (else their
// spec version).
func (f factReader) workersOf(ctx context.Context, namespace, clusterName string, which workerFilter) ([]skew.Worker, error) {
	inCluster := []client.ListOption{client.InNamespace(namespace)}
	if f.indexed {
		// Only read, never written: the cache's own objects need no copy.
		inCluster = append(inCluster, client.MatchingFields{ClusterNameField: clusterName}, client.UnsafeDisableDeepCopy)
	}
	var workers []skew.Worker

	mds := &clusterv1.MachineDeploymentList{}
	if err := f.reader.List(ctx, mds, inCluster...); err != nil {
		return nil, fmt.Errorf("listing MachineDeployments of Cluster %s/%s: %w", namespace, clusterName, err)
	}
	workers = slices.Grow(workers, len(mds.Items))
	for _, md := range mds.Items {
		if md.Spec.ClusterName != clusterName || which.skips(md.Labels) {
			continue
		}
		workers = append(workers, skew.Worker{Kind: "MachineDeployment", Name: md.Name, Version: skew.ReadVersion(md.Spec.Template.Spec.Version)})
	}

	mps := &clusterv1.MachinePoolList{}
	if err := f.reader.List(ctx, mps, inCluster...); err != nil {
		return nil, fmt.Errorf("listing MachinePools of Cluster %s/%s: %w", namespace, clusterName, err)
	}
	// A MachinePool's Machines carry its name as a label value, hashed when
	// the name is not a valid label value.
	poolByLabel := map[string]string{}
	workers = slices.Grow(workers, len(mps.Items))
	for _, mp := range mps.Items {
		if mp.Spec.ClusterName != clusterName {
			continue
		}
		poolByLabel[kinds.MachinePoolLabelValue(mp.Name)] = mp.Name
		if which.skips(mp.Labels) {
			continue
		}
		workers = append(workers, skew.Worker{Kind: "MachinePool", Name: mp.Name, Version: skew.ReadVersion(mp.Spec.Template.Spec.Version)})
	}

	machines := &clusterv1.MachineList{}
	if err := f.reader.List(ctx, machines, inCluster...); err != nil {
		return nil, fmt.Errorf("listing Machines of Cluster %s/%s: %w", namespace, clusterName, err)
	}
	workers = slices.Grow(workers, len(machines.Items))
	for _, m := range machines.Items {
		if m.Spec.ClusterName != clusterName || which.skips(m.Labels) {
			continue
		}
		if _, isControlPlane := m.Labels[controlPlaneLabel]; isControlPlane {
			continue
		}
		version := m.Spec.Version
		if m.Status.NodeInfo != nil && m.Status.NodeInfo.KubeletVersion != "" {
			version = m.Status.NodeInfo.KubeletVersion
		}
		w := skew.Worker{Kind: "Machine", Name: m.Name, Version: skew.ReadVersion(version)}
		w.PoolKind, w.PoolName = poolOf(m.Labels, poolByLabel)
		workers = append(workers, w)
	}
	sort.SliceStable(workers, func(i, j int) bool {
		if workers[i].Kind != workers[j].Kind {
			return workers[i].Kind < workers[j].Kind
		}
		return workers[i].Name < workers[j].Name
	})
	return workers, nil
}

// poolOf returns the pool a worker Machine belongs to, from the labels
// Cluster API puts on it: cluster.x-k8s.io/deployment-name (the
// MachineDeployment's name, through its MachineSet) or
// cluster.x-k8s.io/pool-name (the MachinePool's name, or its hash, looked up
// in poolByLabel). Both are "" when it belongs to no pool, or to a MachinePool
// whose hashed name matches none of the cluster's.
func poolOf(labels map[string]string, poolByLabel map[string]string) (kind, name string) {
	if md := labels[clusterv1.MachineDeploymentNameLabel]; md != "" {
		return "MachineDeployment", md
	}
	value := labels[clusterv1.MachinePoolNameLabel]
	if value == "" {
		return "", ""
	}
	if mp, ok := poolByLabel[value]; ok {
		return "MachinePool", mp
	}
	if !strings.Contains(value, "_") {
		// The pool is not listed (gone, or not yet in the cache): a value
		// that is not a hash ("_" is in no object name) is its name.
		return "MachinePool", value
	}
	return "", ""
}

// clusterNaming returns the name of the Cluster in namespace whose
// spec.controlPlaneRef names the control plane kind/name of group, "" when
// none does.
func (f factReader) clusterNaming(ctx context.Context, namespace, kind, group, name string) (string, error) {
	opts := []client.ListOption{client.InNamespace(namespace)}
	if f.indexed {
		opts = append(opts, client.UnsafeDisableDeepCopy)
	}
	clusters := &clusterv1.ClusterList{}
	if err := f.reader.List(ctx, clusters, opts...); err != nil {
		return "", fmt.Errorf("listing Clusters in %s: %w", namespace, err)
	}
	for _, c := range clusters.Items {
		if ref := c.Spec.ControlPlaneRef; ref.Name == name && ref.Kind == kind && ref.APIGroup == group {
			return c.Name, nil
		}
	}
	return "", nil
}

// readOnce appends to vs the version written s, unless s is "" or a version
// of vs is written so already.
func readOnce(vs []skew.Version, s string) []skew.Version {
	if s == "" || slices.ContainsFunc(vs, func(v skew.Version) bool { return v.Text() == s }) {
		return vs
	}
	return append(vs, skew.ReadVersion(s))
}

// distinct returns vs without the unset ones and those written as an
// earlier one.
func distinct(vs []skew.Version) []skew.Version {
	var out []skew.Version
	for _, v := range vs {
		if v.Text() != "" && !slices.ContainsFunc(out, func(o skew.Version) bool { return o.Text() == v.Text() }) {
			out = append(out, v)
		}
	}
	return out
}
