package webhooks

import (
	"context"
	"fmt"
	"net/http"
	"reflect"
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	controlplanev1 "sigs.k8s.io/cluster-api/api/controlplane/kubeadm/v1beta2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/webhook"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	rgv1alpha1 "github.com/rollout-guard/rollout-guard/api/v1alpha1"
	"github.com/rollout-guard/rollout-guard/history"
	"github.com/rollout-guard/rollout-guard/kinds"
	"github.com/rollout-guard/rollout-guard/policy"
	"github.com/rollout-guard/rollout-guard/revisions"
)

// Paths of the webhooks registered by path, as config/webhook/manifests.yaml
// names them (the builder derives the same from the kind).
const (
	ValidateKubeadmControlPlanePath = "/validate-controlplane-cluster-x-k8s-io-v1beta2-kubeadmcontrolplane"

	MutateMachineDeploymentPath   = "/mutate-cluster-x-k8s-io-v1beta2-machinedeployment"
	MutateMachinePoolPath         = "/mutate-cluster-x-k8s-io-v1beta2-machinepool"
	MutateKubeadmControlPlanePath = "/mutate-controlplane-cluster-x-k8s-io-v1beta2-kubeadmcontrolplane"
	MutateClusterClassPath        = "/mutate-cluster-x-k8s-io-v1beta2-clusterclass"
	MutateClusterPath             = "/mutate-cluster-x-k8s-io-v1beta2-cluster"
)

// Options configure the webhooks.
type Options struct {
	// OverrideGroups may use the break-glass override annotation.
	OverrideGroups []string
	// Recorder writes the revisions the mutating webhooks replace.
	Recorder *history.Recorder
	// ControlPlaneKinds are the control-plane kinds of other providers the
	// guard polices through Cluster API's contract (--control-plane-kinds):
	// each gets a validating and a mutating webhook at
	// ValidateContractControlPlanePath and MutateContractControlPlanePath.
	ControlPlaneKinds []schema.GroupKind
	// Enforcement is what the validating webhooks do with a change the
	// policy refuses (EnforcementDeny when empty).
	Enforcement Enforcement
	// Self is the user name the guard writes as (SelfUser): the only one
	// RevisionGuard lets change a RolloutRevision's record.
	Self string
	// StampKey signs the stamps the mutating webhooks write and verifies
	// those of stored objects (LoadStampKey); empty, the guard signs
	// nothing and takes every stamp as written.
	StampKey revisions.StampKey
	// Watches, when set, follows the watches of the manager's caches (its
	// Wrap must wrap the manager's rest.Config): while one is down, changes
	// are judged from live reads instead of possibly stale caches.
	Watches *Watches
}

// SetupWithManager registers the cache indexes the guard reads through, its
// Machine store (MachineStore), the validating
// webhooks and the mutating (revision-stamping) webhooks, at the paths
// config/webhook/manifests.yaml names:
//
//	/validate-cluster-x-k8s-io-v1beta2-machinedeployment
//	/validate-cluster-x-k8s-io-v1beta2-machinepool
//	/validate-controlplane-cluster-x-k8s-io-v1beta2-kubeadmcontrolplane
//	/validate-cluster-x-k8s-io-v1beta2-cluster
//	/validate-cluster-x-k8s-io-v1beta2-machineset
//	/validate-cluster-x-k8s-io-v1beta2-machine
//	/mutate-cluster-x-k8s-io-v1beta2-machinedeployment
//	/mutate-cluster-x-k8s-io-v1beta2-machinepool
//	/mutate-controlplane-cluster-x-k8s-io-v1beta2-kubeadmcontrolplane
//	/mutate-cluster-x-k8s-io-v1beta2-clusterclass
//	/mutate-cluster-x-k8s-io-v1beta2-cluster
//	/mutate-rollout-guard-io-v1alpha1-rolloutrevision (OwnerLabeler)
//	/validate-rollout-guard-io-v1alpha1-rolloutrevision (RevisionGuard)
func SetupWithManager(ctx context.Context, mgr ctrl.Manager, opts Options) error {
	if err := AddIndexes(ctx, mgr); err != nil {
		return err
	}
	machines, err := NewMachineStore(ctx, mgr)
	if err != nil {
		return err
	}
	// A control plane created anew is judged against what its Cluster's
	// control planes ran, as their records say: from the revision Index,
	// else one List of the records' metadata.
	recorded := history.ClusterHistory{Reader: mgr.GetAPIReader()}
	stamps := StampsOf(opts)
	if opts.Recorder != nil {
		recorded.Index = opts.Recorder.Index
	}
	cached := policy.Policy{Reader: machines.Reader(mgr.GetCache()), Mapper: mgr.GetRESTMapper(), Indexed: true, ControlPlaneKinds: opts.ControlPlaneKinds,
		Live: mgr.GetAPIReader(), Recorded: recorded, StampsWritten: stamps.Written}
	var judge policy.Decider = cached
	if opts.Watches != nil {
		judge = FreshPolicy{
			Cached:  cached,
			Live:    policy.Policy{Reader: mgr.GetAPIReader(), Mapper: mgr.GetRESTMapper(), ControlPlaneKinds: opts.ControlPlaneKinds, Recorded: recorded, StampsWritten: stamps.Written},
			Watches: opts.Watches,
		}
	}
	overrides := policy.OverrideGroups(opts.OverrideGroups)
	restorers := AccessReviews{Client: mgr.GetClient()}
	// What the webhooks record, they record of objects as the API server
	// stored them: the cache's copy at the request's resourceVersion, or a
	// read.
	stored := Persisted{Cache: mgr.GetCache(), Live: mgr.GetAPIReader()}
	var recording *Recording
	if opts.Recorder != nil {
		recording = &Recording{Recorder: opts.Recorder, Stored: stored}
	}
	mdV, kcpV, clusterV := NewValidators(judge, overrides, recording)
	mpV := NewMachinePoolValidator(judge, overrides, recording)
	msV, machineV := NewMachineValidators(judge, overrides)
	mdV.Enforcement, kcpV.Enforcement, clusterV.Enforcement, mpV.Enforcement = opts.Enforcement, opts.Enforcement, opts.Enforcement, opts.Enforcement
	msV.Enforcement, machineV.Enforcement = opts.Enforcement, opts.Enforcement
	mdV.Stamps, kcpV.Stamps, clusterV.Stamps, mpV.Stamps = stamps, stamps, stamps, stamps

	// Every handler decodes worker pools and control planes without what
	// none of them reads (leanDecoder); other objects whole.
	decoder := newLeanDecoder(mgr.GetScheme())
	server := mgr.GetWebhookServer()
	server.Register(validatePath(clusterv1.GroupVersion.WithKind("MachineDeployment")), validatingWebhook(mdV, decoder))
	server.Register(validatePath(clusterv1.GroupVersion.WithKind("MachinePool")), validatingWebhook(mpV, decoder))
	server.Register(validatePath(controlplanev1.GroupVersion.WithKind("KubeadmControlPlane")), validatingWebhook(kcpV, decoder))
	server.Register(validatePath(clusterv1.GroupVersion.WithKind("Cluster")), validatingWebhook(clusterV, decoder))
	server.Register(validatePath(kinds.MachineSet.GVK), validatingWebhook(msV, decoder))
	server.Register(validatePath(kinds.Machine.GVK), validatingWebhook(machineV, decoder))

	for _, gk := range opts.ControlPlaneKinds {
		kind, err := ContractHistoryKind(mgr, gk)
		if err != nil {
			return err
		}
		v := &Validator[*unstructured.Unstructured]{Policy: judge, Overrides: overrides, Recording: recording, GroupKind: gk, Enforcement: opts.Enforcement, Stamps: stamps}
		validating := admission.WithValidator[*unstructured.Unstructured](mgr.GetScheme(), v)
		validating.WithContextFunc = withCaller
		mgr.GetWebhookServer().Register(ValidateContractControlPlanePath(gk), validating)
		stamper := &Stamper{Kind: kind, Recorder: opts.Recorder, Stored: stored, Policy: judge, Overrides: overrides, Decoder: decoder, Restorers: restorers, Key: opts.StampKey, Stamps: stamps}
		mgr.GetWebhookServer().Register(MutateContractControlPlanePath(gk), &webhook.Admission{Handler: stamper, WithContextFunc: withCaller})
	}
	for _, kind := range kinds.WithRevisions() {
		path := mutatePath(kind.GVK)
		stamper := &Stamper{Kind: kind, Recorder: opts.Recorder, Stored: stored, Policy: judge, Overrides: overrides, Decoder: decoder, Restorers: restorers, Key: opts.StampKey, Stamps: stamps}
		mgr.GetWebhookServer().Register(path, &webhook.Admission{Handler: stamper, WithContextFunc: withCaller})
	}
	mgr.GetWebhookServer().Register(MutateRolloutRevisionPath, &webhook.Admission{Handler: OwnerLabeler{}})
	mgr.GetWebhookServer().Register(ValidateRolloutRevisionPath, &webhook.Admission{Handler: RevisionGuard{Self: opts.Self}, WithContextFunc: withCaller})
	return nil
}

// StampsOf returns what tells the stamps the guard wrote from those it did
// not (history.Stamps) with opts' key and recorder; nil without a key.
func StampsOf(opts Options) *history.Stamps {
	if len(opts.StampKey) == 0 {
		return nil
	}
	return &history.Stamps{Key: opts.StampKey, Recorder: opts.Recorder}
}

// ContractHistoryKind resolves a control-plane kind listed with
// --control-plane-kinds to its history kind, at the version the API server
// serves; a kind not served is an error naming it, as the guard cannot
// police it.
func ContractHistoryKind(mgr ctrl.Manager, gk schema.GroupKind) (kinds.Kind, error) {
	mapping, err := mgr.GetRESTMapper().RESTMapping(gk)
	if err != nil {
		return kinds.Kind{}, fmt.Errorf("control-plane kind %s.%s (--control-plane-kinds) is not served by the API server; install its provider's CRD first, or take it off the list: %w", gk.Kind, gk.Group, err)
	}
	return kinds.Contract(mapping.GroupVersionKind), nil
}

// ValidateContractControlPlanePath is the path of the validating webhook of
// a control-plane kind listed with --control-plane-kinds, e.g.
// /validate-controlplane-cluster-x-k8s-io-kthreescontrolplane.
func ValidateContractControlPlanePath(gk schema.GroupKind) string {
	return "/validate-" + contractPathSuffix(gk)
}

// MutateContractControlPlanePath is the path of the revision stamper of a
// control-plane kind listed with --control-plane-kinds, e.g.
// /mutate-controlplane-cluster-x-k8s-io-kthreescontrolplane.
func MutateContractControlPlanePath(gk schema.GroupKind) string {
	return "/mutate-" + contractPathSuffix(gk)
}

// mutatePath is the path of the revision stamper of one of Cluster API's
// own kinds (gvk), named as controller-runtime's builder names a kind's
// webhooks: the group with dots as dashes, the version, the lowercase kind.
func mutatePath(gvk schema.GroupVersionKind) string {
	return "/mutate-" + pathSuffix(gvk)
}

// validatePath is the path of the validating webhook of one of Cluster
// API's own kinds (gvk), named as mutatePath.
func validatePath(gvk schema.GroupVersionKind) string {
	return "/validate-" + pathSuffix(gvk)
}

func pathSuffix(gvk schema.GroupVersionKind) string {
	return strings.ReplaceAll(gvk.Group, ".", "-") + "-" + gvk.Version + "-" + strings.ToLower(gvk.Kind)
}

// validatingWebhook is the validating webhook of v's kind, its objects
// decoded by decoder (see validating).
func validatingWebhook[T client.Object](v *Validator[T], decoder admission.Decoder) *webhook.Admission {
	return &webhook.Admission{
		Handler: validating[T]{validator: v, decoder: decoder, new: func() T {
			return reflect.New(reflect.TypeFor[T]().Elem()).Interface().(T)
		}},
		WithContextFunc: withCaller,
	}
}

// contractPathSuffix names a kind in paths as controller-runtime names
// typed kinds: the group with dots as dashes, then the lowercase kind.
func contractPathSuffix(gk schema.GroupKind) string {
	return strings.ReplaceAll(gk.Group, ".", "-") + "-" + strings.ToLower(gk.Kind)
}

// AddIndexes indexes MachineDeployments and MachinePools by
// spec.clusterName, so one cached List finds a cluster's pools (its
// Machines are in MachineStore, indexed the same way). Registering
// the indexes also starts the informers with the manager, so the first
// admission request does not wait for a cache to fill.
func AddIndexes(ctx context.Context, mgr ctrl.Manager) error {
	indexer := mgr.GetFieldIndexer()
	byCluster := []struct {
		obj  client.Object
		name func(client.Object) []string
	}{
		{&clusterv1.MachineDeployment{}, func(o client.Object) []string { return []string{o.(*clusterv1.MachineDeployment).Spec.ClusterName} }},
		{&clusterv1.MachinePool{}, func(o client.Object) []string { return []string{o.(*clusterv1.MachinePool).Spec.ClusterName} }},
	}
	for _, ix := range byCluster {
		if err := indexer.IndexField(ctx, ix.obj, policy.ClusterNameField, ix.name); err != nil {
			return fmt.Errorf("indexing %T by %s: %w", ix.obj, policy.ClusterNameField, err)
		}
	}
	// Clusters, control planes, ClusterClasses and MachineSets (the owners
	// of Machines) are read by name; ask for their informers now.
	for _, obj := range []client.Object{&clusterv1.Cluster{}, &controlplanev1.KubeadmControlPlane{}, &clusterv1.ClusterClass{}, &clusterv1.MachineSet{}} {
		if _, err := mgr.GetCache().GetInformer(ctx, obj); err != nil {
			return fmt.Errorf("starting the %T informer: %w", obj, err)
		}
	}
	return nil
}

// bootKinds are the kinds whose informers the guard starts with the manager
// and needs before it can judge anything.
func bootKinds() []client.Object {
	return []client.Object{&clusterv1.Cluster{}, &controlplanev1.KubeadmControlPlane{},
		&clusterv1.MachineDeployment{}, &clusterv1.MachinePool{}, &clusterv1.Machine{}, &clusterv1.ClusterClass{}, &clusterv1.MachineSet{}}
}

// HistoryStoreServed is a readiness check of the guard: the API server
// serves RolloutRevisions, where every revision is recorded. Without the
// CRD (config/crd) the guard could record nothing and would refuse every
// change it must record; not ready, it is never armed, so its webhooks are
// not called and Cluster API goes on unpoliced while the install says
// what is missing.
//
// mapper is the manager's RESTMapper, which asks the API server's discovery
// again for a kind it does not know yet.
func HistoryStoreServed(mapper meta.RESTMapper) healthz.Checker {
	return func(*http.Request) error {
		if _, err := mapper.RESTMapping(rgv1alpha1.GroupVersion.WithKind("RolloutRevision").GroupKind(), rgv1alpha1.GroupVersion.Version); err != nil {
			return fmt.Errorf("the API server does not serve %s, where the guard records history: install its CRD (config/crd): %w", rgv1alpha1.Resource.GroupResource(), err)
		}
		return nil
	}
}

// CachesReady is the readiness check of the guard: the informers of the
// kinds it always reads have filled. It deliberately ignores informers
// started later for other providers' control planes: one such kind the guard
// may not read must cost a warning on that cluster's edits, not the
// readiness of every replica (and so every policed edit everywhere).
func CachesReady(mgr ctrl.Manager) healthz.Checker {
	return func(req *http.Request) error {
		for _, obj := range bootKinds() {
			informer, err := mgr.GetCache().GetInformer(req.Context(), obj, cache.BlockUntilSynced(false))
			if err != nil {
				return fmt.Errorf("informer of %T: %w", obj, err)
			}
			if !informer.HasSynced() {
				return fmt.Errorf("cache of %T not filled yet", obj)
			}
		}
		return nil
	}
}
