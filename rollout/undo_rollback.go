package rollout

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/types"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/rollout-guard/rollout-guard/revisions"
	"github.com/rollout-guard/rollout-guard/rollout/internal/core"
)

// undoState is what one undo decided on its first read.
type undoState struct {
	// target is the revision rolled back to.
	target *revisions.Revision
	// readHash is the live content's hash when the target was chosen.
	readHash string
}

// Run rolls back, deciding anew after every conflict.
func (o *UndoOptions) Run(ctx context.Context) error {
	cl, err := o.Session.Clients()
	if err != nil {
		return err
	}
	purpose := "undo " + o.ref.String()
	obj, err := o.Session.Get(ctx, cl, o.ref, purpose)
	if err != nil {
		return err
	}
	purpose = "undo " + core.Describe(obj, o.ref.Kind)
	st := &undoState{}
	err, exhausted := core.RetryConflicts(func() error { return o.attempt(ctx, cl, obj, st) }, func() error {
		fresh, err := o.Session.Reread(ctx, cl, obj, purpose)
		if err != nil {
			return err
		}
		obj = fresh
		rec := revisions.StampsOf(fresh)
		freshHash, err := snapshotHash(fresh)
		if err != nil {
			return fmt.Errorf("cannot %s: %w", purpose, err)
		}
		what := fmt.Sprintf("%s changed after it was read", core.Describe(fresh, o.ref.Kind))
		switch {
		case freshHash == st.readHash:
			o.Session.Notef("conflict: %s (not its revision: still revision %d); reading it again and checking again", what, rec.Revision)
		case freshHash == st.target.Snapshot.Hash:
			o.Session.Notef("conflict: %s: it is now at revision %d, made by %s via %s; reading it again", what, rec.Revision, core.OrUnknown(rec.ChangedBy), core.OrDash(rec.FieldManager))
		case o.ToRevision == 0:
			return fmt.Errorf("cannot %s: it changed while this command ran: it is now at revision %d, made by %s via %s (%s); \"the previous revision\" no longer means %s, so nothing was rolled back: run %s undo again to decide on the new state, or name the revision with --to-revision",
				purpose, rec.Revision, core.OrUnknown(rec.ChangedBy), core.OrDash(rec.FieldManager), core.OrNone(rec.ChangeCause), core.Label(*st.target), o.Session.Name())
		default:
			o.Session.Notef("conflict: %s: it is now at revision %d, made by %s via %s; checking revision %d against it again", what, rec.Revision, core.OrUnknown(rec.ChangedBy), core.OrDash(rec.FieldManager), o.ToRevision)
		}
		return nil
	})
	if exhausted {
		return fmt.Errorf("cannot %s: it kept changing (%d conflicts); nothing was rolled back: %w", purpose, core.MaxAttempts, err)
	}
	return err
}

// attempt makes one attempt at the undo on obj as read; a conflict is
// returned as is.
func (o *UndoOptions) attempt(ctx context.Context, cl *core.Clients, obj client.Object, st *undoState) error {
	kind := core.KindOf(obj)
	id := core.Describe(obj, kind)
	purpose := "undo " + id
	if err := o.checkUndoable(obj, kind, id); err != nil {
		return err
	}
	set, err := o.loadRevisions(ctx, cl, obj, purpose)
	if err != nil {
		return err
	}
	if err := o.chooseTarget(set, st, purpose); err != nil {
		return err
	}
	rb := &plannedRollback{obj: obj, set: set, target: *st.target, want: o.ToRevision, id: id, purpose: purpose}
	if rb.want == 0 {
		rb.want = rb.target.Record.Revision
	}
	if set.Live.Hash == rb.target.Snapshot.Hash {
		return o.alreadyThere(rb)
	}
	if rb.patch, err = o.rollbackPatch(obj, rb.target); err != nil {
		return fmt.Errorf("cannot %s: %w", purpose, err)
	}
	if rb.newObj, err = core.ApplyMergePatch(obj, rb.patch); err != nil {
		return fmt.Errorf("cannot %s: %w", purpose, err)
	}
	if err := o.checkRollback(ctx, cl, rb); err != nil {
		return err
	}
	if live, ok := obj.(*clusterv1.ClusterClass); ok && o.PreviewClass != nil {
		if err := o.PreviewClass(ctx, cl, live, rb.newObj.(*clusterv1.ClusterClass)); err != nil {
			return err
		}
	}
	if live, ok := obj.(*clusterv1.Cluster); ok && o.PreviewClass != nil {
		if err := previewClusterRollback(ctx, o.Session, cl, live, rb.newObj.(*clusterv1.Cluster)); err != nil {
			return err
		}
	}
	return o.rollBack(ctx, cl, rb)
}

// plannedRollback is one attempt's rollback as decided on its read.
type plannedRollback struct {
	// obj is the object as read; newObj is it rolled back (nil while the
	// patch is not made).
	obj, newObj client.Object
	// set is obj's revision history; target the revision it goes back to.
	set    *core.RevisionSet
	target revisions.Revision
	// want is the revision asked for: --to-revision, or the target's
	// number for the previous revision.
	want int64
	// patch is the rollback's merge patch.
	patch []byte
	// id names the object in messages ("MachineDeployment ns/md-0"),
	// purpose the undo in errors.
	id, purpose string
}

// checkUndoable refuses an object undo cannot roll back: one without
// revisions, one its Cluster's topology manages, a paused one.
func (o *UndoOptions) checkUndoable(obj client.Object, kind core.Kind, id string) error {
	if !kind.Guard.HasRevisions() {
		return fmt.Errorf("undo does not work on %s: it has no revisions of its own", id)
	}
	if c, ok := obj.(*clusterv1.Cluster); ok && !c.Spec.Topology.IsDefined() {
		return fmt.Errorf("undo of a Cluster rolls back its spec.topology, and %s has none (it is not a ClusterClass cluster): undo its control plane or one of its worker pools", id)
	}
	if core.TopologyOwned(obj) && kind.GVK != core.Cluster.GVK { // a Cluster carries the label too: its topology is what it owns
		instead := "its spec.topology.version, the class of " + core.TopologyPath(obj) + ", or that worker class's templates in the ClusterClass"
		if kind.Topology.ControlPlane {
			instead = "its spec.topology.version, or the control plane's templates in the ClusterClass (spec.controlPlane)"
		}
		return core.TopologyError("undo", obj, "change it through Cluster CLUSTER instead: "+instead)
	}
	if how := core.PausedBy(obj); how != "" {
		return o.Session.PausedError("undo", obj, how)
	}
	return nil
}

// loadRevisions reads obj's revision history, warns of damaged and stale
// records, and refuses an object the guard recorded nothing of.
func (o *UndoOptions) loadRevisions(ctx context.Context, cl *core.Clients, obj client.Object, purpose string) (*core.RevisionSet, error) {
	set, err := o.Session.LoadHistory(ctx, cl, obj, purpose)
	if err != nil {
		return nil, err
	}
	for _, bad := range set.Bad {
		o.Session.Warnf("skipping a damaged revision record: %v", bad)
	}
	set.WarnStale(o.Session)
	if !set.Recorded() {
		return nil, fmt.Errorf("cannot %s: rollout-guard recorded no history for it (no RolloutRevisions, no %s stamps), so there is nothing to roll back to; is the guard installed? See %s history %s",
			purpose, revisions.Prefix, o.Session.Name(), o.ref)
	}
	return set, nil
}

// chooseTarget picks the revision to roll back to on the first read
// (--to-revision, else the previous one) and keeps it in st for the
// attempts after a conflict.
func (o *UndoOptions) chooseTarget(set *core.RevisionSet, st *undoState, purpose string) error {
	if st.target != nil {
		return nil
	}
	var target revisions.Revision
	var ok bool
	if o.ToRevision > 0 {
		if target, ok = set.Find(o.ToRevision); !ok {
			return fmt.Errorf("cannot %s: it has no revision %d; recorded revisions: %s (see %s history %s)", purpose, o.ToRevision, set.Numbers(), o.Session.Name(), o.ref)
		}
	} else if target, ok = set.Previous(); !ok {
		return fmt.Errorf("cannot %s: it has no earlier revision to roll back to; recorded revisions: %s", purpose, set.Numbers())
	}
	st.target, st.readHash = &target, set.Live.Hash
	return nil
}

// alreadyThere answers an undo to the content that is live: nothing to
// change, said as such, or with --emit the manifest as it is live.
func (o *UndoOptions) alreadyThere(rb *plannedRollback) error {
	op := fmt.Sprintf("skipped rollback: already at revision %d", rb.want)
	if n := rb.set.LiveNumber(); n != rb.want && n > 0 {
		op += fmt.Sprintf(" (its content is live as revision %d)", n)
	}
	if o.emit == core.EmitNone {
		return o.printObject(rb.obj, op)
	}
	// Git may still hold something else: the manifest is worth having.
	o.Session.Notef("%s is already at revision %d: nothing to change; printing it as it is live", rb.id, rb.want)
	patch, err := o.rollbackPatch(rb.obj, rb.target)
	if err != nil {
		return fmt.Errorf("cannot %s: %w", rb.purpose, err)
	}
	return core.Emit(o.Session.IOStreams.Out, o.emit, rb.obj, rb.obj, patch)
}

// checkRollback runs the checks before a rollback is sent, in order: the
// target's author, a GitOps controller's ownership (a live change only),
// the templates the target references, and the guard's policy; a client
// dry run shows what would change before its local verdict.
func (o *UndoOptions) checkRollback(ctx context.Context, cl *core.Clients, rb *plannedRollback) error {
	if err := o.checkAuthor(rb.set, rb.target, rb.id); err != nil {
		return err
	}
	if o.emit == core.EmitNone && o.dry == core.DryRunNone {
		inGit := fmt.Sprintf("%s undo %s --to-revision %d -n %s --emit yaml", o.Session.Name(), o.ref, rb.want, rb.obj.GetNamespace())
		if err := o.Session.CheckGitOps(ctx, cl, "undo", rb.obj, o.Force, inGit); err != nil {
			return err
		}
	}
	if o.dry == core.DryRunClient {
		// What would change, then the local verdict.
		if err := o.showChanges(rb.set, rb.target, rb.id); err != nil {
			return err
		}
	}
	wayOut := fmt.Sprintf("recreate it, or pick another revision with --to-revision (see %s history %s)", o.Session.Name(), o.ref)
	if err := o.Session.CheckTemplates(ctx, cl, rb.obj.GetNamespace(), core.TemplateRefsOf(rb.newObj), fmt.Sprintf("undo %s to %s", rb.id, core.Label(rb.target)), wayOut); err != nil {
		return err
	}
	if o.dry == core.DryRunServer {
		// The guard itself answers.
		return nil
	}
	return o.checkPolicy(ctx, cl, rb)
}

// checkPolicy judges the rollback with the guard's policy before it is
// sent: a refusal stops it, unless --force with --reason sends it with the
// override for the guard to decide.
func (o *UndoOptions) checkPolicy(ctx context.Context, cl *core.Clients, rb *plannedRollback) error {
	hint := "To ask the guard itself, add --dry-run=server. To override (members of the guard's override groups only; recorded in the history), add --force --reason TEXT."
	switch {
	case o.emit != core.EmitNone:
		hint = "The guard refuses it the same way when a GitOps controller applies it. To ask the guard itself, run the undo with --dry-run=server instead of --emit."
	case o.Force && o.Reason == "":
		hint = "To ask the guard itself, add --dry-run=server. To override (members of the guard's override groups only; recorded in the history), add --reason TEXT to --force."
	}
	refusal := o.Session.CheckPolicy(ctx, cl, rb.obj, rb.newObj, hint, o.dry == core.DryRunClient || o.emit != core.EmitNone)
	if refusal == nil {
		return nil
	}
	if !o.Force || o.Reason == "" {
		return refusal
	}
	o.Session.Warnf("rollout-guard's policy refuses this change (%s); sending it with the override (--force): the guard decides whether you may", strings.Join(refusal.(*core.PolicyRefusal).Rules, ", "))
	return nil
}

// rollBack does what was asked with a rollback that passed every check:
// shows what it changes, then prints it for Git (--emit), prints it as a
// client dry run, or sends it (a server dry run, or the real write).
func (o *UndoOptions) rollBack(ctx context.Context, cl *core.Clients, rb *plannedRollback) error {
	if o.dry != core.DryRunClient {
		// Every check passed: what is about to be sent (or printed for Git).
		if err := o.showChanges(rb.set, rb.target, rb.id); err != nil {
			return err
		}
	}
	if o.emit != core.EmitNone {
		return core.Emit(o.Session.IOStreams.Out, o.emit, rb.obj, rb.newObj, rb.patch)
	}
	if o.dry == core.DryRunClient {
		if o.PrintFlags.Data() {
			return o.printObject(rb.newObj, "")
		}
		return o.printObject(rb.obj, fmt.Sprintf("rolled back to revision %d (dry run)", rb.want))
	}
	if err := o.Session.Send(ctx, cl, rb.obj, types.MergePatchType, rb.patch, o.dry, rb.purpose); err != nil {
		return err
	}
	op := fmt.Sprintf("rolled back to revision %d", rb.want)
	if o.dry == core.DryRunServer {
		op += " (server dry run)"
	} else if n := revisions.StampsOf(rb.obj).Revision; n > 0 {
		op += fmt.Sprintf(" (now revision %d)", n)
	}
	return o.printObject(rb.obj, op)
}

// checkAuthor refuses a rollback to a revision of unknown author without
// --force (core.UnknownAuthorError, with what it would change), and warns when
// --force lets it through.
func (o *UndoOptions) checkAuthor(set *core.RevisionSet, target revisions.Revision, id string) error {
	why := core.AuthorUnknownOf(target.Record)
	if why == "" {
		return nil
	}
	if o.Force {
		o.Session.Warnf("the author of %s of %s is unknown (%s); rolling back to it anyway (--force)", core.Label(target), id, core.AuthorUnknownReason(why))
		return nil
	}
	var diff bytes.Buffer
	if err := core.PrintDiff(&diff, set, target, ""); err != nil {
		return err
	}
	show := fmt.Sprintf("%s history %s -n %s", o.Session.Name(), o.ref, set.Obj.GetNamespace())
	return core.UnknownAuthorError{ID: id, Target: target, Diff: diff.String(), Show: show, Authored: core.AuthoredNumbers(set)}
}

// showChanges prints the fields the rollback changes against the live
// object, under a title that says what is done with them: on stdout, or
// on stderr when stdout carries data (-o) or a manifest (--emit).
func (o *UndoOptions) showChanges(set *core.RevisionSet, target revisions.Revision, id string) error {
	from, to := liveLabel(set), core.Label(target)
	var title string
	switch {
	case o.emit != core.EmitNone:
		title = fmt.Sprintf("%s: printing the rollback from %s to %s for Git (nothing sent)", id, from, to)
	case o.dry == core.DryRunClient:
		title = fmt.Sprintf("%s: would roll back from %s to %s (dry run: nothing sent)", id, from, to)
	case o.dry == core.DryRunServer:
		title = fmt.Sprintf("%s: would roll back from %s to %s (server dry run: nothing stored)", id, from, to)
	default:
		title = fmt.Sprintf("%s: rolling back from %s to %s", id, from, to)
	}
	out := o.Session.IOStreams.Out
	if o.PrintFlags.Data() || o.emit != core.EmitNone {
		out = o.Session.IOStreams.ErrOut
	}
	return core.PrintDiff(out, set, target, title)
}

// rollbackPatch is the rollback: revisions.RollbackPatch (the content and the
// resourceVersion precondition) with the change-cause and, with --force,
// the override annotation, in one merge patch.
func (o *UndoOptions) rollbackPatch(obj client.Object, target revisions.Revision) ([]byte, error) {
	raw, err := revisions.RollbackPatch(obj, target.Snapshot)
	if err != nil {
		return nil, err
	}
	var p map[string]any
	if err := json.Unmarshal(raw, &p); err != nil {
		return nil, fmt.Errorf("decoding the rollback patch: %w", err)
	}
	ann := core.CauseAnnotations(o.cause)
	if o.Force && o.Reason != "" {
		if obj.GetAnnotations()[revisions.AnnotationOverride] == o.Reason {
			return nil, fmt.Errorf("the object still carries the override reason %q from an earlier override, which the guard treats as spent: give a different --reason", o.Reason)
		}
		if ann == nil {
			ann = map[string]any{}
		}
		ann[revisions.AnnotationOverride] = o.Reason
	}
	if len(ann) > 0 {
		md, _ := p["metadata"].(map[string]any)
		if md == nil {
			md = map[string]any{}
			p["metadata"] = md
		}
		md["annotations"] = ann
	}
	out, err := json.Marshal(p)
	if err != nil {
		return nil, fmt.Errorf("encoding the rollback patch: %w", err)
	}
	return out, nil
}

// printObject prints obj as -o asks, or for people as "RESOURCE.GROUP/NAME
// op".
func (o *UndoOptions) printObject(obj client.Object, op string) error {
	p, err := o.PrintFlags.ToPrinter(op)
	if err != nil {
		return err
	}
	return p.PrintObj(obj, o.Session.IOStreams.Out)
}

// liveLabel names the live revision in messages.
func liveLabel(set *core.RevisionSet) string {
	if r, ok := set.Current(); ok {
		return core.Label(r)
	}
	return "the live content"
}

// snapshotHash is the hash of an object's revision content.
func snapshotHash(obj client.Object) (string, error) {
	kind := core.KindOf(obj)
	if !kind.Guard.HasRevisions() {
		return "", fmt.Errorf("%s has no revisions", core.Describe(obj, kind))
	}
	s, err := kind.Guard.Snapshot(obj)
	return s.Hash, err
}
