package core

import (
	"context"
	"fmt"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/rollout-guard/rollout-guard/revisions"
)

// The marks GitOps controllers leave on the objects they apply.
const (
	// ArgoCDTrackingAnnotation is Argo CD's annotation tracking method (the
	// default since Argo CD 3.0): "<app>:<group>/<kind>:<namespace>/<name>",
	// <app> being "<app namespace>_<app name>" for an Application outside
	// Argo CD's own namespace.
	ArgoCDTrackingAnnotation = "argocd.argoproj.io/tracking-id"
	// ArgoCDInstanceLabel is Argo CD's label tracking method (its default
	// before 3.0): the Application's name. It is also one of Kubernetes'
	// recommended labels, which Helm charts set to their release: alone it
	// says nothing; with an Argo CD Application of that name it is Argo CD's.
	ArgoCDInstanceLabel = "app.kubernetes.io/instance"
	// FluxKustomizeNameLabel is the name of the Flux Kustomization that
	// applied an object.
	FluxKustomizeNameLabel = "kustomize.toolkit.fluxcd.io/name"
	// FluxKustomizeNamespaceLabel is that Kustomization's namespace.
	FluxKustomizeNamespaceLabel = "kustomize.toolkit.fluxcd.io/namespace"
	// FluxHelmNameLabel is the name of the Flux HelmRelease that installed
	// an object.
	FluxHelmNameLabel = "helm.toolkit.fluxcd.io/name"
	// FluxHelmNamespaceLabel is that HelmRelease's namespace.
	FluxHelmNamespaceLabel = "helm.toolkit.fluxcd.io/namespace"
)

// The GitOps controllers the CLI recognises, as messages name them.
const (
	argoCD = "Argo CD"
	flux   = "Flux"
)

// gitOpsFieldManagers are the field managers GitOps controllers write with,
// and the controller each belongs to: Argo CD's server-side apply manager
// (argo-cd common.ArgoCDSSAManager) and its application controller's name,
// Flux's kustomize-controller and helm-controller (their controller names,
// which they use as field managers).
var gitOpsFieldManagers = map[string]string{
	"argocd-controller":             argoCD,
	"argocd-application-controller": argoCD,
	"kustomize-controller":          flux,
	"helm-controller":               flux,
}

// gitOpsServiceAccounts are the service accounts GitOps controllers run as
// in their default installations, and the controller each belongs to.
var gitOpsServiceAccounts = map[string]string{
	"argocd-application-controller": argoCD,
	"kustomize-controller":          flux,
	"helm-controller":               flux,
}

// gitOps says which GitOps controller manages an object, and how the CLI
// knows.
type gitOps struct {
	// controller is "Argo CD" or "Flux".
	controller string
	// owner is what applies the object, e.g. "Application guestbook" or
	// "Kustomization flux-system/apps"; "" when the mark does not say.
	owner string
	// mark is the mark found, e.g. "annotation argocd.argoproj.io/tracking-id".
	mark string
}

// String names the controller, the owner and the mark: "Argo CD
// (Application guestbook, annotation argocd.argoproj.io/tracking-id)".
func (g gitOps) String() string {
	if g.owner == "" {
		return fmt.Sprintf("%s (%s)", g.controller, g.mark)
	}
	return fmt.Sprintf("%s (%s, %s)", g.controller, g.owner, g.mark)
}

// GitOpsOf tells whether a GitOps controller manages obj, from the marks
// that are its own: Argo CD's tracking annotation, Flux's
// kustomize-controller or helm-controller labels, or a field manager of one
// of them in metadata.managedFields. The marks that name the owner come
// first. Argo CD's tracking label, which Helm sets too, needs the Argo CD
// Application it names (see Session.GitOpsOfLive).
func GitOpsOf(obj client.Object) (gitOps, bool) {
	if g, ok := ownMarks(obj); ok {
		return g, true
	}
	return fieldManagers(obj)
}

// ownMarks finds the annotation and labels that only a GitOps controller
// sets, and that name what applies the object.
func ownMarks(obj client.Object) (gitOps, bool) {
	ann, labels := obj.GetAnnotations(), obj.GetLabels()
	if id := ann[ArgoCDTrackingAnnotation]; id != "" {
		app, _, _ := strings.Cut(id, ":")
		return gitOps{controller: argoCD, owner: argoCDApplication(app), mark: "annotation " + ArgoCDTrackingAnnotation}, true
	}
	if name := labels[FluxKustomizeNameLabel]; name != "" {
		return gitOps{controller: flux, owner: "Kustomization " + namespaced(labels[FluxKustomizeNamespaceLabel], name),
			mark: "labels " + FluxKustomizeNameLabel + " and namespace"}, true
	}
	if name := labels[FluxHelmNameLabel]; name != "" {
		return gitOps{controller: flux, owner: "HelmRelease " + namespaced(labels[FluxHelmNamespaceLabel], name),
			mark: "labels " + FluxHelmNameLabel + " and namespace"}, true
	}
	return gitOps{}, false
}

// fieldManagers finds a GitOps controller's field manager in
// metadata.managedFields.
func fieldManagers(obj client.Object) (gitOps, bool) {
	for _, mf := range obj.GetManagedFields() {
		if ctrl, ok := gitOpsFieldManagers[mf.Manager]; ok {
			return gitOps{controller: ctrl, mark: fmt.Sprintf("field manager %s in metadata.managedFields", mf.Manager)}, true
		}
	}
	return gitOps{}, false
}

// argoCDApplication names an Argo CD Application from its tracking value:
// "guestbook", or "apps_guestbook" for one in namespace apps (an
// Application's name cannot hold "_").
func argoCDApplication(app string) string {
	if app == "" {
		return ""
	}
	if ns, name, ok := strings.Cut(app, "_"); ok {
		return "Application " + ns + "/" + name
	}
	return "Application " + app
}

func namespaced(namespace, name string) string {
	if namespace == "" {
		return name
	}
	return namespace + "/" + name
}

// GitOpsController is the GitOps controller that made a revision, from its
// recorded field manager or its user (a controller's service account), or
// "" when none did.
func GitOpsController(rec revisions.Record) string {
	if ctrl, ok := gitOpsFieldManagers[rec.FieldManager]; ok {
		return ctrl
	}
	if rest, ok := strings.CutPrefix(rec.ChangedBy, "system:serviceaccount:"); ok {
		if _, sa, ok := strings.Cut(rest, ":"); ok {
			return gitOpsServiceAccounts[sa]
		}
	}
	return ""
}

// Via is the VIA column of a revision: its field manager, and the GitOps
// controller that made it in brackets: "kustomize-controller [Flux]".
func Via(rec revisions.Record) string {
	ctrl := GitOpsController(rec)
	switch {
	case ctrl == "":
		return OrDash(rec.FieldManager)
	case rec.FieldManager == "":
		return "[" + ctrl + "]"
	}
	return rec.FieldManager + " [" + ctrl + "]"
}

// gitOpsError stops a live change of an object a GitOps controller
// manages: the controller would revert it at its next sync.
type gitOpsError struct {
	verb string
	obj  client.Object
	g    gitOps
	// inGit is the command that prints the change for Git.
	inGit string
}

// Error names the object, its controller and the way out.
func (e gitOpsError) Error() string {
	return fmt.Sprintf("cannot %s %s: it is managed by %s, and %s will revert a change made here at its next sync; make the change in Git instead: %s prints the manifest to commit (--emit patch: the merge patch); to change the live object anyway, add --force",
		e.verb, Describe(e.obj, KindOf(e.obj)), e.g, e.g.controller, e.inGit)
}

// CheckGitOps stops a live change of obj when a GitOps controller manages
// it (GitOpsOfLive), unless force: then it warns that the controller will
// revert it.
func (c *Session) CheckGitOps(ctx context.Context, cl *Clients, verb string, obj client.Object, force bool, inGit string) error {
	g, ok := c.GitOpsOfLive(ctx, cl, obj)
	if !ok {
		return nil
	}
	if !force {
		return gitOpsError{verb: verb, obj: obj, g: g, inGit: inGit}
	}
	c.Warnf("%s is managed by %s; changing it here anyway (--force): %s will revert it at its next sync unless Git has the same change", Describe(obj, KindOf(obj)), g, g.controller)
	return nil
}

// ArgoCDApplication is the kind of Argo CD's Applications.
var ArgoCDApplication = schema.GroupVersionKind{Group: "argoproj.io", Version: "v1alpha1", Kind: "Application"}

// GitOpsOfLive is GitOpsOf, and Argo CD's label tracking: the label
// app.kubernetes.io/instance counts only when an Argo CD Application of
// that name exists in the cluster (Helm sets the label to its release on
// everything a chart makes). When the CLI may not read Applications it
// says so, and does not count the label.
func (c *Session) GitOpsOfLive(ctx context.Context, cl *Clients, obj client.Object) (gitOps, bool) {
	if g, ok := ownMarks(obj); ok {
		return g, true
	}
	if app := obj.GetLabels()[ArgoCDInstanceLabel]; app != "" {
		found, err := argoCDApplicationExists(ctx, cl, app)
		switch {
		case err != nil:
			c.Warnf("%s has the label %s=%s, which Argo CD's label tracking sets (as does Helm), and the CLI cannot read Argo CD's Applications to tell which (%v): if Argo CD manages it, it will revert this change at its next sync",
				Describe(obj, KindOf(obj)), ArgoCDInstanceLabel, app, APIStatusOf(err))
		case found:
			return gitOps{controller: argoCD, owner: argoCDApplication(app), mark: "label " + ArgoCDInstanceLabel + ", Argo CD's tracking label"}, true
		}
	}
	return fieldManagers(obj)
}

// argoCDApplicationExists reports whether the Argo CD Application a
// tracking label names exists: "name" in any namespace, "namespace_name"
// in that namespace. An API server that does not serve Applications has
// none.
func argoCDApplicationExists(ctx context.Context, cl *Clients, app string) (bool, error) {
	list := &metav1.PartialObjectMetadataList{}
	list.SetGroupVersionKind(ArgoCDApplication.GroupVersion().WithKind(ArgoCDApplication.Kind + "List"))
	opts := []client.ListOption{client.MatchingFieldsSelector{Selector: fields.OneTermEqualSelector("metadata.name", app)}}
	if ns, name, ok := strings.Cut(app, "_"); ok {
		opts = []client.ListOption{client.InNamespace(ns), client.MatchingFieldsSelector{Selector: fields.OneTermEqualSelector("metadata.name", name)}}
	}
	err := cl.Client.List(ctx, list, opts...)
	switch {
	case meta.IsNoMatchError(err) || apierrors.IsNotFound(err):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("listing Argo CD Applications (applications.argoproj.io): %w", err)
	}
	return len(list.Items) > 0, nil
}
