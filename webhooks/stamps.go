package webhooks

import (
	"context"
	"fmt"
	"maps"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	controlplanev1 "sigs.k8s.io/cluster-api/api/controlplane/kubeadm/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/rollout-guard/rollout-guard/history"
	"github.com/rollout-guard/rollout-guard/policy"
	"github.com/rollout-guard/rollout-guard/revisions"
)

// change is one request's change of an object, as the stamper reads it.
type change struct {
	req admission.Request
	// oldObj is nil on create. When the guard did not write the stamps
	// of the stored object (history.Stamps), oldObj and oldAnn are a copy
	// without them, and stored is the request's old object as sent.
	oldObj, newObj client.Object
	oldAnn, newAnn map[string]string
	// stored is the request's old object as sent: what the replaced
	// revision is checked against (Persisted) and recorded of.
	stored  client.Object
	newSnap revisions.Snapshot
	// oldSnap and oldRec are the replaced revision's content and record
	// (on an update).
	oldSnap revisions.Snapshot
	oldRec  revisions.Record
	// id names the object in messages: "Kind namespace/name".
	id   string
	user string
	// clientCause is the change cause the client set with this request, ""
	// when it set none.
	clientCause string
	now         time.Time
	dryRun      bool
}

// stamps returns the annotations the object must carry after this request:
// nil values delete a key. It takes the revision (recording the one it
// replaces), the break-glass override, the restart and, for a control
// plane, what it has run.
func (s *Stamper) stamps(ctx context.Context, req admission.Request, oldObj, newObj client.Object) (map[string]*string, error) {
	c, err := s.readChange(req, oldObj, newObj)
	if err != nil {
		return nil, err
	}
	if s.restores(ctx, c) {
		return s.signed(c, map[string]*string{}), nil
	}
	if err := s.readOld(ctx, &c); err != nil {
		return nil, err
	}
	rec, restart, err := s.revision(ctx, c)
	if err != nil {
		return nil, err
	}
	if rec.Override, err = s.override(ctx, c, rec); err != nil {
		return nil, err
	}
	out, err := annotationsOf(c, rec, restart)
	if err != nil {
		return nil, err
	}
	if err := s.stampHighestRun(ctx, c, rec, out); err != nil {
		return nil, err
	}
	if !c.dryRun && c.oldObj != nil {
		s.admitted.remember(s.Kind, c.newObj, c.newSnap)
	}
	return s.signed(c, out), nil
}

// readOld reads the revision an update replaces: its content, and the
// record its stamps make when the guard wrote them (Stamps). Stamps it did
// not write — an object created while it was down, carrying whatever its
// client set — are taken off the old object the rest of the request reads
// (the policy's highest run included), and the replaced revision is
// recorded as of unknown author and number.
func (s *Stamper) readOld(ctx context.Context, c *change) error {
	if c.oldObj == nil {
		return nil
	}
	c.stored = c.oldObj
	var err error
	if c.oldSnap, err = s.admitted.snapshot(s.Kind, c.oldObj); err != nil {
		return fmt.Errorf("rollout-guard could not take the previous revision of %s: %w", c.id, err)
	}
	if s.Stamps == nil {
		c.oldRec, err = revisions.RecordFromAnnotations(c.oldAnn)
		if err != nil {
			log.FromContext(ctx).Info("ignoring malformed revision stamps on the stored object", "object", c.id, "error", err.Error())
			c.oldRec = revisions.Record{}
		}
		if c.oldRec.Revision == 0 {
			c.oldRec = history.Adopted(c.oldObj)
		}
		return nil
	}
	rec, written, err := s.Stamps.Of(ctx, c.oldObj, s.Kind.GVK.Kind, c.oldSnap.Hash)
	if err != nil {
		return fmt.Errorf("rollout-guard could not tell whether it wrote the stamps of %s: %w", c.id, err)
	}
	c.oldRec = rec
	if !written {
		log.FromContext(ctx).Info("the stored object's revision stamps were not written by rollout-guard; judged and recorded without them (author and number unknown)",
			"object", c.id, "claimedRevision", c.oldAnn[revisions.AnnotationRevision], "claimedBy", c.oldAnn[revisions.AnnotationChangedBy], "user", c.user)
		stripped, ok := c.oldObj.DeepCopyObject().(client.Object)
		if !ok {
			return fmt.Errorf("rollout-guard could not copy the previous %s", c.id)
		}
		stripped.SetAnnotations(revisions.Unstamped(c.oldAnn))
		c.oldObj, c.oldAnn = stripped, stripped.GetAnnotations()
	}
	return nil
}

// signed returns out with the signature of the stamps the object carries
// once out is applied (revisions.AnnotationSignature): bound to the
// object's UID on an update, to its namespace, kind and name and this
// moment on a create (the API server gives it a UID only after the
// mutating webhooks). A Stamper without a Key signs nothing.
func (s *Stamper) signed(c change, out map[string]*string) map[string]*string {
	if len(s.Key) == 0 {
		return out
	}
	after := maps.Clone(c.newAnn)
	if after == nil {
		after = map[string]string{}
	}
	for k, v := range out {
		if v == nil {
			delete(after, k)
		} else {
			after[k] = *v
		}
	}
	stamps := revisions.Signed(after, history.AnnotationCachedHash)
	if len(stamps) == 0 {
		out[revisions.AnnotationSignature] = nil
		return out
	}
	ns := c.newObj.GetNamespace()
	if ns == "" {
		ns = c.req.Namespace
	}
	b := revisions.Binding{Kind: s.Kind.GVK.Kind, Namespace: ns, Name: c.newObj.GetName(), Hash: c.newSnap.Hash}
	if c.oldObj != nil {
		b.UID = string(c.newObj.GetUID())
		if b.UID == "" {
			b.UID = string(c.req.UID) // never: an update's object has its UID
		}
	}
	out[revisions.AnnotationSignature] = strPtr(s.Key.Sign(stamps, b, c.now))
	return out
}

// readChange gathers what the stamps of one request are made of.
func (s *Stamper) readChange(req admission.Request, oldObj, newObj client.Object) (change, error) {
	c := change{
		req: req, oldObj: oldObj, newObj: newObj,
		id:     fmt.Sprintf("%s %s/%s", s.Kind.GVK.Kind, newObj.GetNamespace(), newObj.GetName()),
		user:   req.UserInfo.Username,
		newAnn: newObj.GetAnnotations(),
		now:    s.now(),
		dryRun: req.DryRun != nil && *req.DryRun,
	}
	var err error
	if c.newSnap, err = s.Kind.Snapshot(newObj); err != nil {
		return change{}, fmt.Errorf("rollout-guard could not take the revision of %s: %w", c.id, err)
	}
	if oldObj != nil {
		c.oldAnn = oldObj.GetAnnotations()
	}
	// A created object that carries a revision stamp was exported from
	// somewhere the guard stamped it (clusterctl move, a restore): its
	// change-cause is that revision's, not this request's.
	carried := oldObj == nil && c.newAnn[revisions.AnnotationRevision] != ""
	if cause := c.newAnn[revisions.AnnotationChangeCause]; cause != "" && cause != c.oldAnn[revisions.AnnotationChangeCause] && !carried {
		c.clientCause = cause
	}
	return c, nil
}

// restores says whether a create keeps the revision stamps it carries, as
// they are: when they are well formed and the request's user may restore
// history (Restorers) — `clusterctl move` and a restore from its directory
// backup, which bring the object's RolloutRevisions next. Otherwise, or
// when the API server cannot say, the create is stamped as any other.
func (s *Stamper) restores(ctx context.Context, c change) bool {
	if c.oldObj != nil || s.Restorers == nil || c.newAnn[revisions.AnnotationRevision] == "" || createUnverified(c.newObj) != "" {
		return false
	}
	if _, err := revisions.RecordFromAnnotations(c.newAnn); err != nil {
		return false
	}
	logger := log.FromContext(ctx)
	ok, err := s.Restorers.MayRestore(ctx, c.req.UserInfo, c.newObj.GetNamespace())
	if err != nil {
		logger.Info("stamping a created object anew: could not tell whether its user may restore its history", "object", c.id, "user", c.user, "error", err.Error())
		return false
	}
	if ok {
		logger.Info("keeping the revision stamps a created object carries: its history is being restored (clusterctl move, a backup)",
			"object", c.id, "user", c.user, "revision", c.newAnn[revisions.AnnotationRevision])
	}
	return ok
}

// revision returns the revision stamps of the object after the request
// and the restart it asks for (nil for none): revision 1 on create, the
// stored stamps when the content is unchanged, else the next revision,
// recording the one it replaces.
func (s *Stamper) revision(ctx context.Context, c change) (revisions.Record, *revisions.Restart, error) {
	if c.oldObj == nil {
		if reason := createUnverified(c.newObj); reason != "" {
			noteUnverified(ctx, s.Kind.GVK.Kind, reason, "nothing (a create)", c.newObj, c.user)
		}
		return revisions.Record{Revision: 1, History: []int64{1}, ChangedBy: c.user, ChangedAt: c.now, FieldManager: fieldManagerOf(c.req),
			ChangeCause: firstNonEmpty(c.clientCause, "created"), ChangeType: revisions.ChangeCreated}, nil, nil
	}
	oldSnap, oldRec := c.oldSnap, c.oldRec
	if oldSnap.Hash == c.newSnap.Hash {
		restart, err := s.restart(ctx, c, oldSnap, oldRec)
		return oldRec, restart, err
	}
	rec, err := s.nextRevision(ctx, c, oldSnap, oldRec)
	return rec, nil, err
}

// restart returns the restart a request of unchanged content asks for (a
// new rollout.after), nil for none. Not a new revision: the stored stamps
// stay, whatever the client sent; the restart is stamped, and recorded
// once the API server has stored it (revisions.AnnotationRestart).
func (s *Stamper) restart(ctx context.Context, c change, oldSnap revisions.Snapshot, oldRec revisions.Record) (*revisions.Restart, error) {
	after := s.Kind.RolloutAfter(c.newObj)
	if after == "" || after == s.Kind.RolloutAfter(c.oldObj) {
		return nil, nil
	}
	// This stamp replaces the stored one: make sure the restart stored is
	// recorded, as the reconciler may not have seen it.
	if !c.dryRun && c.oldAnn[revisions.AnnotationRestart] != "" {
		if err := s.recordStored(ctx, c.stored, oldSnap, oldRec, "the restart before", c.user); err != nil {
			return nil, fmt.Errorf("rollout-guard could not record the last restart of %s: %w", c.id, err)
		}
	}
	return &revisions.Restart{At: c.now, By: c.user, FieldManager: fieldManagerOf(c.req), After: after, Cause: c.clientCause}, nil
}

// nextRevision records the revision a new content replaces, then returns
// the stamps of the new one, numbered above every recorded revision (one
// recorded for a change that slipped past the guard is above the stored
// stamps).
func (s *Stamper) nextRevision(ctx context.Context, c change, oldSnap revisions.Snapshot, oldRec revisions.Record) (revisions.Record, error) {
	next := oldRec.Revision + 1
	if !c.dryRun {
		// Not stored: answered as it would be, recording nothing. A request
		// of the API server's own carries the stored object (its retry, if
		// this was one made with an old copy, records).
		stored, err := s.Stored.Verified(ctx, s.Kind, c.stored, oldSnap, fmt.Sprintf("revision %d", oldRec.Revision), c.user)
		if err != nil {
			return revisions.Record{}, fmt.Errorf("rollout-guard could not check revision %d of %s against the API server: %w", oldRec.Revision, c.id, err)
		}
		if stored {
			highest, err := s.Recorder.RecordReplaced(ctx, c.stored, s.Kind.GVK, oldSnap, oldRec)
			if err != nil {
				return revisions.Record{}, fmt.Errorf("rollout-guard could not record revision %d of %s: %w", oldRec.Revision, c.id, err)
			}
			next = max(next, highest+1)
			revisionsRecordedTotal.WithLabelValues(s.Kind.GVK.Kind).Inc()
		}
	}
	described, err := revisions.Describe(oldSnap, c.newSnap)
	if err != nil {
		return revisions.Record{}, fmt.Errorf("rollout-guard could not describe the change of %s: %w", c.id, err)
	}
	cause := firstNonEmpty(c.clientCause, described.Cause)
	changeType := revisions.ChangeRollout
	if described.InPlace {
		changeType = revisions.ChangeInPlace
	}
	return revisions.Record{Revision: next, History: []int64{next}, ChangedBy: c.user, ChangedAt: c.now, FieldManager: fieldManagerOf(c.req),
		ChangeCause: cause, ChangeType: changeType}, nil
}

// override returns the break-glass override of revision rec: a request
// that sets the override annotation, from a member of an override group,
// on a kind the policy judges, is recorded with the rules it overrides; a request that keeps the
// revision keeps the override that made it, if any.
func (s *Stamper) override(ctx context.Context, c change, rec revisions.Record) (*revisions.Override, error) {
	if reason, requested := policy.OverrideRequested(c.oldObj, c.newObj); requested {
		if !s.Overrides.Allows(c.req.UserInfo) || s.Kind.Decide == nil {
			// Not in an override group, or a kind the policy does not
			// judge (a ClusterClass): nothing is overridden.
			return nil, nil
		}
		d, _, err := s.Policy.Decide(ctx, c.oldObj, c.newObj)
		if err != nil {
			return nil, err
		}
		if rules := policy.RuleIDs(d); len(rules) > 0 {
			return &revisions.Override{By: c.user, Reason: reason, Rules: rules}, nil
		}
		return nil, nil
	}
	if c.oldObj != nil && rec.Revision == revisions.StampsOf(c.oldObj).Revision {
		return revisions.StampsOf(c.oldObj).Override, nil
	}
	return nil, nil
}

// annotationsOf returns the project's annotations of the object after the
// request: every stamp the client sent is forgotten, exactly the stamps of
// rec and the latest restart are set.
func annotationsOf(c change, rec revisions.Record, restart *revisions.Restart) (map[string]*string, error) {
	out := map[string]*string{}
	for k := range c.newAnn {
		if strings.HasPrefix(k, revisions.Prefix) && k != revisions.AnnotationOverride {
			out[k] = nil
		}
	}
	// An override annotation carried over from the stored object is spent.
	if c.oldObj != nil && c.newAnn[revisions.AnnotationOverride] != "" && c.newAnn[revisions.AnnotationOverride] == c.oldAnn[revisions.AnnotationOverride] {
		out[revisions.AnnotationOverride] = nil
	}
	for k, v := range rec.Annotations() {
		if v == "" {
			out[k] = nil // an empty stamp says nothing; keep the object tidy
			continue
		}
		out[k] = strPtr(v)
	}
	// The latest restart of the live revision: this request's, else the
	// stored one while the revision stays; a new revision has none yet.
	out[revisions.AnnotationRestart] = nil
	switch {
	case restart != nil:
		stamp, err := revisions.RestartStamp(*restart)
		if err != nil {
			return nil, fmt.Errorf("rollout-guard could not stamp the restart of %s: %w", c.id, err)
		}
		out[revisions.AnnotationRestart] = strPtr(stamp)
	case c.oldObj != nil && rec.Revision == revisions.StampsOf(c.oldObj).Revision && c.oldAnn[revisions.AnnotationRestart] != "":
		out[revisions.AnnotationRestart] = strPtr(c.oldAnn[revisions.AnnotationRestart])
	}
	return out, nil
}

// stampHighestRun sets, on a control plane, the highest versions it has
// run (revisions.AnnotationHighestRun), raised by revision rec. Advance
// keeps what ran before this revision, so that a bump can be reverted while
// it has not rolled out (policy.RevertedRun); a revert of such a bump takes
// the bump out of what the control plane has run. Worker pools keep none.
func (s *Stamper) stampHighestRun(ctx context.Context, c change, rec revisions.Record, out map[string]*string) error {
	var (
		highest revisions.HighestRun
		prev    int64
		run     revisions.Run
	)
	switch newCP := c.newObj.(type) {
	case *controlplanev1.KubeadmControlPlane:
		// What cannot be read (a version that is not one) raises nothing.
		run, _ = revisions.RunOfKubeadmControlPlane(newCP)
		oldKCP, _ := c.oldObj.(*controlplanev1.KubeadmControlPlane)
		highest = policy.HighestRunOf(oldKCP)
		if oldKCP != nil {
			prev = revisions.StampsOf(oldKCP).Revision
			if rec.Revision != prev {
				before, err := s.Policy.RevertedRun(ctx, oldKCP, newCP)
				if err != nil {
					return fmt.Errorf("rollout-guard could not tell whether %s reverts a bump: %w", c.id, err)
				}
				if before != nil {
					highest = *before
				}
			}
		}
	case *unstructured.Unstructured:
		// A control plane of another provider: the highest Kubernetes
		// version it has run, kept as for a KubeadmControlPlane (no etcd).
		run, _ = revisions.RunOf(c.newSnap)
		oldCP, _ := c.oldObj.(*unstructured.Unstructured)
		highest = policy.HighestRunOfContract(oldCP)
		if oldCP != nil {
			prev = revisions.StampsOf(oldCP).Revision
			if before := policy.RevertedRunOfContract(oldCP, newCP); rec.Revision != prev && before != nil {
				highest = *before
			}
		}
	default:
		return nil
	}
	return stampHighest(out, highest.Advance(run, rec.Revision, prev), c.id)
}
