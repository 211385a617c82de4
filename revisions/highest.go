package revisions

import (
	"fmt"

	controlplanev1 "sigs.k8s.io/cluster-api/api/controlplane/kubeadm/v1beta2"

	"github.com/rollout-guard/rollout-guard/skew"
)

// HighestRun is what a control plane is known to have run, from its recorded
// revisions: the highest Kubernetes version and the highest etcd version, each
// with the revision that ran it. Its JSON is the value of AnnotationHighestRun.
type HighestRun struct {
	// Kubernetes is the highest Kubernetes version, as written in the spec.
	Kubernetes string `json:"kubernetes,omitempty"`
	// KubernetesRevision is the revision that ran Kubernetes.
	KubernetesRevision int64 `json:"kubernetesRevision,omitempty"`
	// Etcd is the highest etcd version, e.g. "3.6.5" (the explicit image tag
	// parsed, or kubeadm's default for the Kubernetes version).
	Etcd string `json:"etcd,omitempty"`
	// EtcdRevision is the revision that ran Etcd.
	EtcdRevision int64 `json:"etcdRevision,omitempty"`
	// Before is what the revisions before revision BeforeRevision ran (its
	// own Before is nil): what the control plane had run before its latest
	// change, so that change can be reverted while it has not rolled out.
	// nil when unknown (an object stamped before the guard kept it).
	Before *HighestRun `json:"before,omitempty"`
	// BeforeRevision is the revision whose predecessors Before covers.
	BeforeRevision int64 `json:"beforeRevision,omitempty"`
}

// Advance returns h, the highest run of a control plane up to its previous
// revision, raised by run, what revision runs: when revision is new (not
// the one h last saw, prev), Before becomes h itself, so what came before
// the latest change stays known; otherwise Before is kept.
func (h HighestRun) Advance(run Run, revision, prev int64) HighestRun {
	before, beforeRev := h.Before, h.BeforeRevision
	if revision != prev {
		b := h
		b.Before, b.BeforeRevision = nil, 0
		before, beforeRev = &b, revision
	}
	out := h.Raise(run, revision)
	out.Before, out.BeforeRevision = before, beforeRev
	return out
}

// BeforeOf returns what the control plane had run before revision, and
// whether that is known.
func (h HighestRun) BeforeOf(revision int64) (HighestRun, bool) {
	if h.Before == nil || h.BeforeRevision != revision || revision == 0 {
		return HighestRun{}, false
	}
	return *h.Before, true
}

// Run is what one control-plane revision runs, each version read once: its
// Kubernetes version, as written in spec.version, and its etcd version (e.g.
// "3.6.5"), unset when not known.
type Run struct {
	Kubernetes skew.Version
	Etcd       skew.EtcdVersion
}

// RunOf returns what one control-plane revision runs: for a
// KubeadmControlPlane, KubeadmRun of its version and etcd image tag. When the
// etcd version cannot be known it returns what it knows, with no etcd, and
// an error saying why. A control plane read through the contract runs no
// etcd the product knows: no etcd, without an error.
func RunOf(snap Snapshot) (Run, error) {
	switch snap.Kind {
	case KindKubeadmControlPlane, KindContractControlPlane:
	default:
		return Run{}, fmt.Errorf("run of revision %s: a %q revision runs no control plane", snap.Hash, snap.Kind)
	}
	sum, err := snap.Summary()
	if err != nil {
		return Run{}, fmt.Errorf("run of revision %s: %w", snap.Hash, err)
	}
	k := skew.ReadVersion(sum.Version)
	if snap.Kind == KindContractControlPlane {
		// Another provider's etcd (if any) is not known: only the
		// Kubernetes version counts.
		return Run{Kubernetes: k}, nil
	}
	run, err := KubeadmRun(k, skew.ReadEtcdVersion(sum.EtcdImageTag))
	if err != nil {
		return run, fmt.Errorf("run of revision %s: %w", snap.Hash, err)
	}
	return run, nil
}

// RunOfKubeadmControlPlane returns what kcp's revision runs, read from the
// typed object (the same as RunOf its Snapshot, without encoding and
// decoding its content).
func RunOfKubeadmControlPlane(kcp *controlplanev1.KubeadmControlPlane) (Run, error) {
	k := skew.ReadVersion(kcp.Spec.Version)
	run, err := KubeadmRun(k, skew.ReadEtcdVersion(kcp.Spec.KubeadmConfigSpec.ClusterConfiguration.Etcd.Local.ImageTag))
	if err != nil {
		return run, fmt.Errorf("run of KubeadmControlPlane %s/%s: %w", kcp.Namespace, kcp.Name, err)
	}
	return run, nil
}

// KubeadmRun returns what a KubeadmControlPlane at Kubernetes version k with
// etcd image tag tag runs: its etcd from skew.EtcdForTag, the tag, or
// kubeadm's default for k when the tag is unset. When the etcd version
// cannot be known (k or the tag is not a version, or no known kubeadm
// release covers k) the Run has no etcd, and the error says why.
func KubeadmRun(k skew.Version, tag skew.EtcdVersion) (Run, error) {
	run := Run{Kubernetes: k}
	if !k.Valid() {
		return run, k.Err()
	}
	e, _, err := skew.EtcdForTag(k.Semver(), tag)
	if err != nil {
		return run, fmt.Errorf("etcd: %w", err)
	}
	run.Etcd = skew.ReadEtcdVersion(e.String())
	return run, nil
}

// FoldHighest returns h raised by snap, the content of the given revision:
// h.Raise of RunOf(snap). A snapshot that is not of a control plane, or
// whose content cannot be read, leaves h as it is.
func FoldHighest(h HighestRun, snap Snapshot, revision int64) HighestRun {
	run, _ := RunOf(snap)
	return h.Raise(run, revision)
}

// Raise returns h raised by run, what the given revision runs: run's
// Kubernetes version replaces h's when it is higher (a higher minor, or a
// higher patch in the same minor), and likewise its etcd version. Versions
// that are not versions, or unknown, are skipped. On a tie the higher
// revision number is kept, so the result does not depend on the order of
// raising.
func (h HighestRun) Raise(run Run, revision int64) HighestRun {
	r := h.read().raise(run, revision)
	h.Kubernetes, h.KubernetesRevision = r.kubernetes.Text(), r.kubernetesRevision
	h.Etcd, h.EtcdRevision = r.etcd.Text(), r.etcdRevision
	return h
}

// History returns h as package skew takes it, each version read once;
// sources read "revision 4".
func (h HighestRun) History() skew.History {
	return h.read().history()
}

// HistoryWith returns the History of h.Raise(run, revision), run's versions
// taken as they were read.
func (h HighestRun) HistoryWith(run Run, revision int64) skew.History {
	return h.read().raise(run, revision).history()
}

// highestRead is a HighestRun (without Before), its versions read.
type highestRead struct {
	kubernetes         skew.Version
	kubernetesRevision int64
	etcd               skew.EtcdVersion
	etcdRevision       int64
}

func (h HighestRun) read() highestRead {
	return highestRead{
		kubernetes:         skew.ReadVersion(h.Kubernetes),
		kubernetesRevision: h.KubernetesRevision,
		etcd:               skew.ReadEtcdVersion(h.Etcd),
		etcdRevision:       h.EtcdRevision,
	}
}

// raise is HighestRun.Raise of versions read.
func (r highestRead) raise(run Run, revision int64) highestRead {
	if k := run.Kubernetes; k.Valid() && (!r.kubernetes.Valid() || raises(k.Semver().Compare(r.kubernetes.Semver()), revision, r.kubernetesRevision)) {
		r.kubernetes, r.kubernetesRevision = k, revision
	}
	if e := run.Etcd; e.Valid() && (!r.etcd.Valid() || raises(e.Semver().Compare(r.etcd.Semver()), revision, r.etcdRevision)) {
		r.etcd, r.etcdRevision = e, revision
	}
	return r
}

// history is r as package skew takes it.
func (r highestRead) history() skew.History {
	out := skew.History{HighestKubernetes: r.kubernetes, HighestEtcd: r.etcd}
	if r.kubernetes.Text() != "" {
		out.HighestKubernetesSource = revisionSource(r.kubernetesRevision)
	}
	if r.etcd.Text() != "" {
		out.HighestEtcdSource = revisionSource(r.etcdRevision)
	}
	return out
}

// raises reports whether a version comparing cmp to the current highest
// replaces it: when higher, or equal and from a higher revision.
func raises(cmp int, rev, oldRev int64) bool {
	return cmp > 0 || cmp == 0 && rev > oldRev
}

// HighestOf folds every KubeadmControlPlane revision in revs (in any order)
// with FoldHighest, each under its Record.Revision.
func HighestOf(revs []Revision) HighestRun {
	var h HighestRun
	for _, r := range revs {
		h = FoldHighest(h, r.Snapshot, r.Record.Revision)
	}
	return h
}

func revisionSource(n int64) string {
	if n <= 0 {
		return "an unnumbered revision"
	}
	return fmt.Sprintf("revision %d", n)
}
