package revisions

import (
	"fmt"

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
// revision, raised by snap, the content of revision: when revision is new
// (not the one h last saw, prev), Before becomes h itself, so what came
// before the latest change stays known; otherwise Before is kept.
func (h HighestRun) Advance(snap Snapshot, revision, prev int64) HighestRun {
	before, beforeRev := h.Before, h.BeforeRevision
	if revision != prev {
		b := h
		b.Before, b.BeforeRevision = nil, 0
		before, beforeRev = &b, revision
	}
	out := FoldHighest(h, snap, revision)
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

// RunOf returns what one control-plane revision runs: its Kubernetes
// version, as written in spec.version, and its etcd version (e.g. "3.6.5"),
// from skew.EtcdFor: the explicit etcd image tag, or kubeadm's default for the
// Kubernetes version. When the etcd version cannot be known (an unparseable
// version or image tag, a Kubernetes version no known kubeadm release covers)
// it returns what it knows, with etcd "", and an error saying why. A
// control plane read through the contract runs no etcd the product knows:
// etcd is "" without an error.
func RunOf(snap Snapshot) (kubernetes, etcd string, err error) {
	switch snap.Kind {
	case KindKubeadmControlPlane:
	case KindContractControlPlane:
		// Another provider's etcd (if any) is not known: only the
		// Kubernetes version counts.
		sum, err := snap.Summary()
		if err != nil {
			return "", "", fmt.Errorf("run of revision %s: %w", snap.Hash, err)
		}
		return sum.Version, "", nil
	default:
		return "", "", fmt.Errorf("run of revision %s: a %q revision runs no control plane", snap.Hash, snap.Kind)
	}
	sum, err := snap.Summary()
	if err != nil {
		return "", "", fmt.Errorf("run of revision %s: %w", snap.Hash, err)
	}
	k, err := skew.ParseVersion(sum.Version)
	if err != nil {
		return sum.Version, "", fmt.Errorf("run of revision %s: %w", snap.Hash, err)
	}
	e, _, err := skew.EtcdFor(k, sum.EtcdImageTag)
	if err != nil {
		return sum.Version, "", fmt.Errorf("run of revision %s: etcd: %w", snap.Hash, err)
	}
	return sum.Version, e.String(), nil
}

// FoldHighest returns h raised by snap, the content of the given revision:
// snap's Kubernetes version replaces h's when it is higher (a higher minor,
// or a higher patch in the same minor), and likewise its etcd version.
// Unparseable or unknown versions are skipped, as are snapshots that are not
// of a control plane. On a tie the higher revision number is kept, so
// the result does not depend on the order of folding.
func FoldHighest(h HighestRun, snap Snapshot, revision int64) HighestRun {
	k, e, _ := RunOf(snap)
	if k != "" {
		if nv, err := skew.ParseVersion(k); err == nil {
			ov, oerr := skew.ParseVersion(h.Kubernetes)
			if oerr != nil || raises(nv.Compare(ov), revision, h.KubernetesRevision) {
				h.Kubernetes, h.KubernetesRevision = k, revision
			}
		}
	}
	if e != "" {
		if nv, err := skew.ParseEtcdVersion(e); err == nil {
			ov, oerr := skew.ParseEtcdVersion(h.Etcd)
			if oerr != nil || raises(nv.Compare(ov), revision, h.EtcdRevision) {
				h.Etcd, h.EtcdRevision = e, revision
			}
		}
	}
	return h
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

// SkewHistory converts h to the input of package skew, each version read;
// sources read "revision 4".
func (h HighestRun) SkewHistory() skew.History {
	out := skew.History{HighestKubernetes: skew.ReadVersion(h.Kubernetes), HighestEtcd: skew.ReadEtcdVersion(h.Etcd)}
	if h.Kubernetes != "" {
		out.HighestKubernetesSource = revisionSource(h.KubernetesRevision)
	}
	if h.Etcd != "" {
		out.HighestEtcdSource = revisionSource(h.EtcdRevision)
	}
	return out
}

func revisionSource(n int64) string {
	if n <= 0 {
		return "an unnumbered revision"
	}
	return fmt.Sprintf("revision %d", n)
}
