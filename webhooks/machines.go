package webhooks

import (
	"context"
	"encoding/binary"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"time"
	"unique"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	toolscache "k8s.io/client-go/tools/cache"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/rollout-guard/rollout-guard/policy"
)

// machinesByCluster is the index of the Machine store: namespace and
// cluster name.
const machinesByCluster = "namespace/cluster"

// MachineStore keeps, of every Machine of the management cluster, what the
// policy reads — its cluster, its version, the kubelet version its node
// reports, when it was made, and the labels that say whether it is a
// control-plane Machine, which pool it belongs to and whether a topology
// owns it — and answers the policy's cached Lists of a cluster's Machines
// (Reader).
//
// Why: kept as a clusterv1.Machine, whose Go struct is large before any
// content, a Machine trimmed to what the guard reads was still the largest
// part of the guard's memory in a management cluster with thousands of
// clusters. A machineEntry of the same facts, its strings shared, holds a
// fraction of it (BenchmarkCacheMemory in test/cmd/bench-scale,
// docs/benchmarks.md).
//
// The entries live in the manager's cache: its Machine informer keeps them
// (CacheOptions gives it CompactMachine as transform), so it fills with
// the other caches, counts for readiness (CachesReady) and is watched like
// them (Watches). The cache cannot give them back as Machines itself; only
// Reader reads them.
type MachineStore struct {
	indexer toolscache.Indexer
}

// NewMachineStore returns the Machine store over the Machine informer of
// mgr's cache, indexing its entries by namespace and cluster. Call it
// before mgr starts.
func NewMachineStore(ctx context.Context, mgr manager.Manager) (*MachineStore, error) {
	informer, err := mgr.GetCache().GetInformer(ctx, &clusterv1.Machine{}, cache.BlockUntilSynced(false))
	if err != nil {
		return nil, fmt.Errorf("the Machine informer: %w", err)
	}
	sii, ok := informer.(toolscache.SharedIndexInformer)
	if !ok {
		return nil, fmt.Errorf("the Machine informer is a %T, not a client-go SharedIndexInformer: the Machine store cannot read it", informer)
	}
	if err := sii.AddIndexers(toolscache.Indexers{machinesByCluster: byCluster}); err != nil {
		return nil, fmt.Errorf("indexing Machines by cluster: %w", err)
	}
	return &MachineStore{indexer: sii.GetIndexer()}, nil
}

// Reader returns a reader that answers the Lists of Machines the policy
// makes through the guard's cache — a namespace and a cluster name
// (policy.ClusterNameField) — from the store, and passes every other read
// to next.
func (s *MachineStore) Reader(next client.Reader) client.Reader {
	return machineReader{Reader: next, machines: s.indexer}
}

// machineReader is MachineStore.Reader.
type machineReader struct {
	client.Reader
	machines toolscache.Indexer
}

// List fills a MachineList from the store; other lists are next's.
func (r machineReader) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	machines, ok := list.(*clusterv1.MachineList)
	if !ok {
		return r.Reader.List(ctx, list, opts...)
	}
	o := (&client.ListOptions{}).ApplyOptions(opts)
	cluster, ok := "", false
	if o.FieldSelector != nil {
		cluster, ok = o.FieldSelector.RequiresExactMatch(policy.ClusterNameField)
	}
	if !ok || o.Namespace == "" || (o.LabelSelector != nil && !o.LabelSelector.Empty()) {
		return fmt.Errorf("the guard's Machine store lists the Machines of one cluster (namespace and %s), not %+v", policy.ClusterNameField, o)
	}
	objs, err := r.machines.ByIndex(machinesByCluster, o.Namespace+"/"+cluster)
	if err != nil {
		return fmt.Errorf("listing the Machines of Cluster %s/%s from the Machine store: %w", o.Namespace, cluster, err)
	}
	machines.Items = make([]clusterv1.Machine, 0, len(objs))
	for _, obj := range objs {
		if e, ok := obj.(*machineEntry); ok {
			machines.Items = append(machines.Items, e.machine())
		}
	}
	return nil
}

// machineEntry is what the store keeps of a Machine. An entry never
// changes once made: a new version of the Machine is a new entry.
//
// Its strings but the name are shared handles (unique.Handle), and what
// Machines of one pool have alike — the labels kept — is one shared
// encoding (rest): thousands of Machines then cost little more than their
// names and numbers.
type machineEntry struct {
	name                            string
	namespace, clusterName, version unique.Handle[string]
	// kubeletVersion is the one its node reports, set when
	// flagMachineNodeInfo.
	kubeletVersion unique.Handle[string]
	// rest encodes the labels the policy reads (see keptMachineLabel),
	// sorted, and the resourceVersion when it is not a decimal number
	// (see encodeRest).
	rest unique.Handle[string]
	// resourceVersion, when flagMachineRV.
	resourceVersion uint64
	// created is the creation time in nanoseconds since the Unix epoch,
	// when flagMachineCreated.
	created int64
	flags   uint8
}

// The flags of a machineEntry.
const (
	// flagMachineRV: resourceVersion holds the resourceVersion.
	flagMachineRV uint8 = 1 << iota
	// flagMachineCreated: created holds the creation time.
	flagMachineCreated
	// flagMachineNodeInfo: the Machine reports its node's system info.
	flagMachineNodeInfo
	// flagMachineUpdatingInPlace: the Machine carries Cluster API's
	// in-place update annotation, which the revert rule reads (such a
	// Machine may already run what its spec does not say yet). Its other
	// annotations are dropped.
	flagMachineUpdatingInPlace
)

// GetObjectKind is part of runtime.Object, which the informer stores.
func (*machineEntry) GetObjectKind() schema.ObjectKind { return schema.EmptyObjectKind }

// DeepCopyObject returns e itself: an entry never changes.
func (e *machineEntry) DeepCopyObject() runtime.Object { return e }

// GetObjectMeta gives the informer the entry's namespace, name and
// resourceVersion (its key, and what a watch resumes from).
func (e *machineEntry) GetObjectMeta() metav1.Object {
	return &metav1.ObjectMeta{Namespace: e.namespace.Value(), Name: e.name, ResourceVersion: e.resourceVersionText()}
}

// resourceVersionText is the entry's resourceVersion as the API server
// gave it.
func (e *machineEntry) resourceVersionText() string {
	if e.flags&flagMachineRV != 0 {
		return strconv.FormatUint(e.resourceVersion, 10)
	}
	rv, _ := decodeRest(e.rest.Value())
	return rv
}

// machine returns the Machine as the policy reads it.
func (e *machineEntry) machine() clusterv1.Machine {
	m := clusterv1.Machine{
		ObjectMeta: metav1.ObjectMeta{Namespace: e.namespace.Value(), Name: e.name, ResourceVersion: e.resourceVersionText()},
		Spec:       clusterv1.MachineSpec{ClusterName: e.clusterName.Value(), Version: e.version.Value()},
	}
	if e.flags&flagMachineCreated != 0 {
		m.CreationTimestamp = metav1.NewTime(time.Unix(0, e.created))
	}
	if _, labels := decodeRest(e.rest.Value()); len(labels) > 0 {
		m.Labels = make(map[string]string, len(labels)/2)
		for i := 0; i < len(labels); i += 2 {
			m.Labels[labels[i]] = labels[i+1]
		}
	}
	if e.flags&flagMachineNodeInfo != 0 && e.kubeletVersion.Value() != "" {
		m.Status.NodeInfo = &corev1.NodeSystemInfo{KubeletVersion: e.kubeletVersion.Value()}
	}
	if e.flags&flagMachineUpdatingInPlace != 0 {
		m.Annotations = map[string]string{clusterv1.UpdateInProgressAnnotation: ""}
	}
	return m
}

// toMachineEntry is the transform of the store's informer: a Machine
// becomes its machineEntry (an entry stays as it is: the informer may
// transform what it already holds).
func toMachineEntry(in any) (any, error) {
	switch obj := in.(type) {
	case *machineEntry:
		return obj, nil
	case *clusterv1.Machine:
		return newMachineEntry(obj), nil
	}
	return in, nil
}

// newMachineEntry is the machineEntry of m.
func newMachineEntry(m *clusterv1.Machine) *machineEntry {
	e := &machineEntry{
		name: m.Name, namespace: unique.Make(m.Namespace), clusterName: unique.Make(m.Spec.ClusterName), version: unique.Make(m.Spec.Version),
	}
	if m.Status.NodeInfo != nil {
		e.kubeletVersion, e.flags = unique.Make(m.Status.NodeInfo.KubeletVersion), e.flags|flagMachineNodeInfo
	}
	if _, ok := m.Annotations[clusterv1.UpdateInProgressAnnotation]; ok {
		e.flags |= flagMachineUpdatingInPlace
	}
	if !m.CreationTimestamp.IsZero() {
		e.created, e.flags = m.CreationTimestamp.UnixNano(), e.flags|flagMachineCreated
	}
	rvText := m.ResourceVersion
	if rv, err := strconv.ParseUint(m.ResourceVersion, 10, 64); err == nil && strconv.FormatUint(rv, 10) == m.ResourceVersion {
		e.resourceVersion, e.flags, rvText = rv, e.flags|flagMachineRV, ""
	}
	var labels []string
	for _, k := range slices.Sorted(maps.Keys(m.Labels)) {
		if keptMachineLabel(k) {
			labels = append(labels, k, m.Labels[k])
		}
	}
	e.rest = encodeRest(rvText, labels)
	return e
}

// encodeRest is the shared encoding of a resourceVersion that is not a
// number ("" when it is) and of label keys and values: each string after
// its length.
func encodeRest(rv string, labels []string) unique.Handle[string] {
	var b []byte
	for _, s := range append([]string{rv}, labels...) {
		b = binary.AppendUvarint(b, uint64(len(s)))
		b = append(b, s...)
	}
	return unique.Make(string(b))
}

// decodeRest reads an encoding of encodeRest.
func decodeRest(s string) (rv string, labels []string) {
	var out []string
	for s != "" {
		n, w := binary.Uvarint([]byte(s[:min(len(s), binary.MaxVarintLen64)]))
		out = append(out, s[w:w+int(n)])
		s = s[w+int(n):]
	}
	if len(out) == 0 {
		return "", nil
	}
	return out[0], out[1:]
}

// keptMachineLabel says which labels of a Machine the policy reads: the
// control-plane label, the labels that name its MachineDeployment or
// MachinePool (refusals group Machines by pool), and the topology-owned
// label (a topology version change leaves those workers to the topology
// controller).
func keptMachineLabel(k string) bool {
	switch k {
	case clusterv1.MachineControlPlaneLabel, clusterv1.MachineDeploymentNameLabel, clusterv1.MachinePoolNameLabel, clusterv1.ClusterTopologyOwnedLabel:
		return true
	}
	return false
}

// byCluster is the store's index of entries by namespace and cluster.
func byCluster(obj any) ([]string, error) {
	if e, ok := obj.(*machineEntry); ok {
		return []string{e.namespace.Value() + "/" + e.clusterName.Value()}, nil
	}
	return nil, nil
}

// shared returns the one copy of s the process keeps.
func shared(s string) string {
	return unique.Make(s).Value()
}

// CompactMachine is the cache transform of Machines (see CacheOptions and
// MachineStore): a Machine becomes its compact entry. Objects of other
// types are returned unchanged.
func CompactMachine(obj any) (any, error) { return toMachineEntry(obj) }
