package revisions

import (
	"fmt"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/rollout-guard/rollout-guard/skew"
)

// What a control plane's records say of its Cluster and of what each of
// its revisions runs, so that the history of a Cluster's control plane is
// found after the control plane is gone.
//
// Why: a control plane deleted with `kubectl delete --cascade=orphan`
// leaves its RolloutRevisions behind with a dead owner UID and no owner
// reference; created again, under a new UID, it has no history of its
// own, and its Machines may be gone too. Judged on its own it could be
// created one minor below what the cluster ran, taking etcd back across a
// minor. The records it left carry the Cluster and the run, in their
// metadata, which the revision Index keeps without the records' data.
const (
	// LabelCluster is the name of the Cluster whose control plane a
	// RolloutRevision records: set by the guard from the control plane as
	// the API server stored it (its owner Cluster, else its cluster-name
	// label), never from a request, once, and never changed after. Records
	// of earlier releases, and those made while their control plane named
	// no Cluster, lack it; a record without it does not count for a
	// control plane created anew.
	LabelCluster = Prefix + "cluster"
	// AnnotationRun is what the revision a control plane's RolloutRevision
	// records runs, derived from its data when it is recorded (FormatRun):
	// "v1.34.3" or "v1.34.3 etcd 3.6.5".
	AnnotationRun = Prefix + "run"
)

// FormatRun is the AnnotationRun value of run: its Kubernetes version,
// then " etcd " and its etcd version when known; "" when the Kubernetes
// version is not a version.
func FormatRun(run Run) string {
	if !run.Kubernetes.Valid() {
		return ""
	}
	if !run.Etcd.Valid() {
		return run.Kubernetes.Text()
	}
	return run.Kubernetes.Text() + " etcd " + run.Etcd.Text()
}

// ParseRun reads an AnnotationRun value written by FormatRun; ok is false
// for anything else.
func ParseRun(s string) (run Run, ok bool) {
	k, e, withEtcd := strings.Cut(s, " etcd ")
	run.Kubernetes = skew.ReadVersion(k)
	if !run.Kubernetes.Valid() || run.Kubernetes.Text() != k {
		return Run{}, false
	}
	if withEtcd {
		run.Etcd = skew.ReadEtcdVersion(e)
		if !run.Etcd.Valid() || run.Etcd.Text() != e {
			return Run{}, false
		}
	}
	return run, true
}

// RunAnnotation is the AnnotationRun of snap, "" when snap is not of a
// control plane or what it runs is not known.
func RunAnnotation(snap Snapshot) string {
	if snap.Kind != KindKubeadmControlPlane && snap.Kind != KindContractControlPlane {
		return ""
	}
	run, _ := RunOf(snap)
	return FormatRun(run)
}

// ClusterLabelValue returns cluster when it can be the value of
// LabelCluster (a label value; Cluster API's own names are), "" when not.
func ClusterLabelValue(cluster string) string {
	if cluster == "" || len(validation.IsValidLabelValue(cluster)) > 0 {
		return ""
	}
	return cluster
}

// ClusterRun is what one recorded revision of a Cluster's control plane
// ran, as its RolloutRevision's metadata says (LabelCluster,
// AnnotationRun).
type ClusterRun struct {
	// Run is what the revision runs.
	Run Run
	// Revision is its number (AnnotationRevision), 0 when unknown.
	Revision int64
	// Kind is the kind of its control plane (LabelOwnerKind).
	Kind string
	// Record names its RolloutRevision, "namespace/name".
	Record string
}

// ClusterRunOf reads the ClusterRun of a RolloutRevision's metadata: ok is
// false when the record names no Cluster, is not of a control plane or
// says nothing readable of its run.
func ClusterRunOf(meta metav1.Object) (ClusterRun, bool) {
	labels := meta.GetLabels()
	kind := labels[LabelOwnerKind]
	if labels[LabelCluster] == "" || kind != KindKubeadmControlPlane && kind != KindContractControlPlane {
		return ClusterRun{}, false
	}
	run, ok := ParseRun(meta.GetAnnotations()[AnnotationRun])
	if !ok {
		return ClusterRun{}, false
	}
	out := ClusterRun{Run: run, Kind: kind, Record: meta.GetNamespace() + "/" + meta.GetName()}
	if rec, err := RecordFromAnnotations(meta.GetAnnotations()); err == nil {
		out.Revision = rec.Revision
	}
	return out, true
}

// HighestOfCluster returns the History of the highest Kubernetes and etcd
// versions runs hold, each named by the record that ran it ("revision 4 of
// a KubeadmControlPlane of Cluster demo, RolloutRevision ns/name"); the
// zero History for none.
func HighestOfCluster(cluster string, runs []ClusterRun) skew.History {
	var out skew.History
	var k, e *ClusterRun
	for i := range runs {
		r := &runs[i]
		if v := r.Run.Kubernetes; v.Valid() && (k == nil || raises(v.Semver().Compare(k.Run.Kubernetes.Semver()), r.Revision, k.Revision)) {
			k = r
		}
		if v := r.Run.Etcd; v.Valid() && (e == nil || raises(v.Semver().Compare(e.Run.Etcd.Semver()), r.Revision, e.Revision)) {
			e = r
		}
	}
	source := func(r *ClusterRun) string {
		return fmt.Sprintf("%s of a %s of Cluster %s recorded in RolloutRevision %s", revisionSource(r.Revision), r.Kind, cluster, r.Record)
	}
	if k != nil {
		out.HighestKubernetes, out.HighestKubernetesSource = k.Run.Kubernetes, source(k)
	}
	if e != nil {
		out.HighestEtcd, out.HighestEtcdSource = e.Run.Etcd, source(e)
	}
	return out
}
