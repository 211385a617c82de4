package history

import (
	"context"
	"fmt"
	"math"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	rgv1alpha1 "github.com/rollout-guard/rollout-guard/api/v1alpha1"
	"github.com/rollout-guard/rollout-guard/kinds"
	"github.com/rollout-guard/rollout-guard/revisions"
)

// migrationPage is how many records one List of the Migration reads.
const migrationPage = 500

// Migration puts the guard's history where it belongs, once, when the guard
// becomes leader:
//
//   - every apps/v1 ControllerRevision an earlier release recorded (those
//     labelled revisions.LabelOwnerUID) becomes a RolloutRevision of the
//     same name, labels, annotations, owner, data and number, and is then
//     deleted, so an upgraded installation keeps its history;
//   - every RolloutRevision whose owner label is not the UID of its
//     controller owner reference — one `clusterctl move` or a restore
//     created while no guard was there to set it (webhooks.OwnerLabeler) —
//     gets its label set;
//   - every RolloutRevision an earlier release recorded with a 40-bit hash
//     label alone gets its content's whole digest
//     (revisions.AnnotationDigest), computed from its data, so that the
//     Index tells its content from any other without reading the data.
//     Until then the Recorder and the Index read such a record whole;
//   - every control-plane RolloutRevision an earlier release recorded,
//     whose control plane still exists, gets the Cluster of that control
//     plane (revisions.LabelCluster) and what its revision ran
//     (revisions.AnnotationRun), so that it counts for a control plane of
//     that Cluster created anew. A record whose control plane is gone
//     (deleted with --cascade=orphan before this release) names no
//     Cluster, and does not count.
//
// All are idempotent: a Migration cut short is finished by the next try,
// or the next start.
// Without the rights to list ControllerRevisions it migrates none, and
// says so.
type Migration struct {
	// Client writes RolloutRevisions and deletes ControllerRevisions.
	Client client.Client
	// Reader lists, from the API server (neither kind is cached).
	Reader client.Reader
	// Recorder merges a migrated record into one of the same content that
	// exists already.
	Recorder *Recorder
	// Done, when set, is marked once the Migration has finished, for the
	// reconcilers that judge unsigned stamps against the records it
	// brings (Stamps).
	Done *MigrationDone
}

// Start runs the Migration until it has done its job or ctx ends, trying
// again with a growing pause (up to MigrationRetryCap) when a step fails —
// a guard started before its CRD is served, for one. It never stops the
// guard: what fails is logged.
func (m Migration) Start(ctx context.Context) error {
	logger := log.FromContext(ctx).WithName("history-migration")
	backoff := wait.Backoff{Duration: time.Second, Factor: 2, Cap: MigrationRetryCap, Steps: math.MaxInt32}
	for {
		moved, labelled, err := m.run(ctx)
		if err == nil {
			logger.Info("earlier history migrated", "controllerRevisionsMoved", moved, "ownerLabelsSet", labelled)
			m.Done.finish()
			return nil
		}
		pause := backoff.Step()
		logger.Error(err, "could not finish moving history into RolloutRevisions; trying again", "controllerRevisionsMoved", moved, "ownerLabelsSet", labelled, "in", pause.String())
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(pause):
		}
	}
}

// MigrationRetryCap bounds the pause between two tries of the Migration.
const MigrationRetryCap = time.Minute

// run moves the ControllerRevisions and sets the owner labels once, and
// returns how many of each it did.
func (m Migration) run(ctx context.Context) (moved, labelled int, _ error) {
	moved, err := m.moveControllerRevisions(ctx)
	if err != nil {
		return moved, 0, err
	}
	if labelled, err = m.setOwnerLabels(ctx); err != nil {
		return moved, labelled, err
	}
	if _, err = m.setDigests(ctx); err != nil {
		return moved, labelled, err
	}
	_, err = m.setClusters(ctx)
	return moved, labelled, err
}

// NeedLeaderElection is true: one replica migrates.
func (Migration) NeedLeaderElection() bool { return true }

// moveControllerRevisions turns the guard's ControllerRevisions into
// RolloutRevisions, and returns how many it moved.
func (m Migration) moveControllerRevisions(ctx context.Context) (int, error) {
	moved := 0
	opts := []client.ListOption{client.HasLabels{revisions.LabelOwnerUID}, client.Limit(migrationPage)}
	for {
		list := &appsv1.ControllerRevisionList{}
		if err := m.Reader.List(ctx, list, opts...); err != nil {
			if apierrors.IsForbidden(err) || apierrors.IsNotFound(err) {
				log.FromContext(ctx).Info("not looking for the ControllerRevisions of an earlier release: the guard may not list them", "error", err.Error())
				return moved, nil
			}
			return moved, fmt.Errorf("listing the ControllerRevisions of an earlier release: %w", err)
		}
		for i := range list.Items {
			if err := m.move(ctx, &list.Items[i]); err != nil {
				return moved, err
			}
			moved++
		}
		if list.Continue == "" {
			return moved, nil
		}
		opts = []client.ListOption{client.HasLabels{revisions.LabelOwnerUID}, client.Limit(migrationPage), client.Continue(list.Continue)}
	}
}

// move records cr as a RolloutRevision and deletes it. A RolloutRevision of
// the same content may exist already — recorded meanwhile from the object's
// stamps, by the reconciler or an edit — and know less (earlier numbers,
// restarts): cr's record is then merged into it, as the Recorder merges any
// record of content already recorded.
func (m Migration) move(ctx context.Context, cr *appsv1.ControllerRevision) error {
	rr := fromControllerRevision(cr)
	err := m.Client.Create(ctx, rr)
	if apierrors.IsAlreadyExists(err) {
		err = m.mergeInto(ctx, rr)
	}
	if err != nil {
		return fmt.Errorf("recording ControllerRevision %s/%s as a RolloutRevision: %w", cr.Namespace, cr.Name, err)
	}
	if err := m.Client.Delete(ctx, cr, client.Preconditions{UID: &cr.UID}); err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		return fmt.Errorf("deleting ControllerRevision %s/%s, recorded as a RolloutRevision: %w", cr.Namespace, cr.Name, err)
	}
	return nil
}

// mergeInto records rr's revision through the Recorder, which merges it
// into the RolloutRevision of the same content that exists.
func (m Migration) mergeInto(ctx context.Context, rr *rgv1alpha1.RolloutRevision) error {
	rev, err := revisions.FromRolloutRevision(rr)
	if err != nil {
		return err
	}
	ref := metav1.GetControllerOfNoCopy(rr)
	if ref == nil {
		return fmt.Errorf("it has no controller owner reference")
	}
	gv, err := schema.ParseGroupVersion(ref.APIVersion)
	if err != nil {
		return fmt.Errorf("its owner reference: %w", err)
	}
	owner := &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Namespace: rr.Namespace, Name: ref.Name, UID: ref.UID}}
	return m.Recorder.Record(ctx, owner, gv.WithKind(ref.Kind), rev.Snapshot, rev.Record)
}

// fromControllerRevision returns the RolloutRevision that records what cr,
// a ControllerRevision of an earlier release, recorded: the same name,
// namespace, labels, annotations, owner references, data and number, the
// owner label set from the controller owner reference.
func fromControllerRevision(cr *appsv1.ControllerRevision) *rgv1alpha1.RolloutRevision {
	c := cr.DeepCopy()
	rr := &rgv1alpha1.RolloutRevision{
		TypeMeta: metav1.TypeMeta{APIVersion: rgv1alpha1.GroupVersion.String(), Kind: "RolloutRevision"},
		ObjectMeta: metav1.ObjectMeta{
			Name: c.Name, Namespace: c.Namespace, Labels: c.Labels, Annotations: c.Annotations, OwnerReferences: c.OwnerReferences,
		},
		Data:     c.Data,
		Revision: c.Revision,
	}
	if uid := revisions.OwnerUID(rr); uid != "" {
		if rr.Labels == nil {
			rr.Labels = map[string]string{}
		}
		rr.Labels[revisions.LabelOwnerUID] = string(uid)
	}
	return rr
}

// setOwnerLabels sets the owner label of every RolloutRevision whose label
// is not its controller owner reference's UID, and returns how many.
func (m Migration) setOwnerLabels(ctx context.Context) (int, error) {
	labelled := 0
	cont := ""
	for {
		list := &metav1.PartialObjectMetadataList{}
		list.SetGroupVersionKind(rgv1alpha1.GroupVersion.WithKind("RolloutRevisionList"))
		if err := m.Reader.List(ctx, list, client.Limit(migrationPage), client.Continue(cont)); err != nil {
			return labelled, fmt.Errorf("listing RolloutRevisions: %w", err)
		}
		for i := range list.Items {
			meta := &list.Items[i]
			uid := string(revisions.OwnerUID(meta))
			if uid == "" || meta.Labels[revisions.LabelOwnerUID] == uid {
				continue
			}
			base := meta.DeepCopy()
			if meta.Labels == nil {
				meta.Labels = map[string]string{}
			}
			meta.Labels[revisions.LabelOwnerUID] = uid
			meta.SetGroupVersionKind(rgv1alpha1.GroupVersion.WithKind("RolloutRevision"))
			if err := m.Client.Patch(ctx, meta, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{})); err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
				return labelled, fmt.Errorf("setting the owner label of RolloutRevision %s/%s: %w", meta.Namespace, meta.Name, err)
			}
			labelled++
		}
		if cont = list.Continue; cont == "" {
			return labelled, nil
		}
	}
}

// setDigests sets revisions.AnnotationDigest on every RolloutRevision the
// guard made that lacks it (an earlier release's), to the digest of its
// data, and returns how many. A record whose data does not match its hash
// label is left as it is: it is read whole, and replaced when its content
// is recorded again.
func (m Migration) setDigests(ctx context.Context) (int, error) {
	set := 0
	cont := ""
	for {
		list := &rgv1alpha1.RolloutRevisionList{}
		if err := m.Reader.List(ctx, list, client.HasLabels{revisions.LabelOwnerUID}, client.Limit(migrationPage), client.Continue(cont)); err != nil {
			return set, fmt.Errorf("listing RolloutRevisions: %w", err)
		}
		for i := range list.Items {
			cr := &list.Items[i]
			if _, ok := cr.Annotations[revisions.AnnotationDigest]; ok {
				continue
			}
			rev, err := revisions.FromRolloutRevision(cr)
			if err != nil {
				log.FromContext(ctx).Info("not setting the digest of a damaged RolloutRevision", "rolloutRevision", cr.Namespace+"/"+cr.Name, "error", err.Error())
				continue
			}
			base := cr.DeepCopy()
			if cr.Annotations == nil {
				cr.Annotations = map[string]string{}
			}
			cr.Annotations[revisions.AnnotationDigest] = rev.Snapshot.Hash
			if err := m.Client.Patch(ctx, cr, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{})); err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
				return set, fmt.Errorf("setting the digest of RolloutRevision %s/%s: %w", cr.Namespace, cr.Name, err)
			}
			set++
		}
		if cont = list.Continue; cont == "" {
			return set, nil
		}
	}
}

// setClusters gives every control-plane RolloutRevision without
// revisions.LabelCluster whose controller owner still exists the Cluster
// that owner belongs to, as stored (kinds.ControlPlaneClusterName), and
// what its revision ran (revisions.AnnotationRun, from its data), and
// returns how many. It lists the records' metadata and reads whole only
// the ones it sets.
func (m Migration) setClusters(ctx context.Context) (int, error) {
	set := 0
	cont := ""
	for {
		list := &metav1.PartialObjectMetadataList{}
		list.SetGroupVersionKind(rgv1alpha1.GroupVersion.WithKind("RolloutRevisionList"))
		if err := m.Reader.List(ctx, list, client.HasLabels{revisions.LabelOwnerUID}, client.Limit(migrationPage), client.Continue(cont)); err != nil {
			return set, fmt.Errorf("listing RolloutRevisions: %w", err)
		}
		for i := range list.Items {
			done, err := m.setCluster(ctx, &list.Items[i])
			if err != nil {
				return set, err
			}
			if done {
				set++
			}
		}
		if cont = list.Continue; cont == "" {
			return set, nil
		}
	}
}

// setCluster is setClusters for the record meta: done says whether it
// set its Cluster.
func (m Migration) setCluster(ctx context.Context, meta *metav1.PartialObjectMetadata) (done bool, _ error) {
	kind := meta.Labels[revisions.LabelOwnerKind]
	if kind != revisions.KindKubeadmControlPlane && kind != revisions.KindContractControlPlane || meta.Labels[revisions.LabelCluster] != "" {
		return false, nil
	}
	if meta.Annotations[revisions.AnnotationRun] != "" {
		// Written by this release, which names the Cluster whenever the
		// control plane had one: none to find, and no read of its owner
		// at every start.
		return false, nil
	}
	ref := metav1.GetControllerOfNoCopy(meta)
	if ref == nil {
		return false, nil // orphaned: which Cluster it was of is not known
	}
	owner := &metav1.PartialObjectMetadata{}
	owner.SetGroupVersionKind(schema.FromAPIVersionAndKind(ref.APIVersion, ref.Kind))
	err := m.Reader.Get(ctx, client.ObjectKey{Namespace: meta.Namespace, Name: ref.Name}, owner)
	switch {
	case apierrors.IsNotFound(err) || apierrors.IsForbidden(err) || apimeta.IsNoMatchError(err):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("reading the owner %s %s/%s of RolloutRevision %s: %w", ref.Kind, meta.Namespace, ref.Name, meta.Name, err)
	case owner.UID != ref.UID:
		return false, nil // another object of the same name
	}
	cluster := revisions.ClusterLabelValue(kinds.ControlPlaneClusterName(owner))
	if cluster == "" {
		return false, nil
	}
	cr := &rgv1alpha1.RolloutRevision{}
	if err := m.Reader.Get(ctx, client.ObjectKey{Namespace: meta.Namespace, Name: meta.Name}, cr); err != nil {
		return false, client.IgnoreNotFound(err)
	}
	rev, err := revisions.FromRolloutRevision(cr)
	if err != nil {
		log.FromContext(ctx).Info("not naming the Cluster of a damaged RolloutRevision", "rolloutRevision", cr.Namespace+"/"+cr.Name, "error", err.Error())
		return false, nil
	}
	base := cr.DeepCopy()
	cr.Labels[revisions.LabelCluster] = cluster
	if run := revisions.RunAnnotation(rev.Snapshot); run != "" && cr.Annotations[revisions.AnnotationRun] == "" {
		if cr.Annotations == nil {
			cr.Annotations = map[string]string{}
		}
		cr.Annotations[revisions.AnnotationRun] = run
	}
	if err := m.Client.Patch(ctx, cr, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{})); err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		return false, fmt.Errorf("naming the Cluster of RolloutRevision %s/%s: %w", cr.Namespace, cr.Name, err)
	}
	return true, nil
}
