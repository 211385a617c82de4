package upgradehold

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/go-logr/logr"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/api/runtime/catalog"
	runtimehooksv1 "sigs.k8s.io/cluster-api/api/runtime/hooks/v1alpha1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/rollout-guard/rollout-guard/waves"
)

// HandlerName is the name of the extension's one handler, as discovery
// announces it. Cluster API registers it as HANDLER.EXTENSIONCONFIG
// (wave-hold.rollout-guard for the shipped ExtensionConfig) and calls it
// at BeforeClusterUpgradePath.
const HandlerName = "wave-hold"

// TimeoutSeconds is how long Cluster API waits for an answer before the
// handler's failurePolicy (Ignore) lets the upgrade go. Short: the topology
// controller waits for it in the middle of a reconcile.
const TimeoutSeconds = 5

// DefaultReadTimeout bounds the List of one call, below TimeoutSeconds, so
// that a slow API server gets a fail-open answer that says so rather than
// a timeout Cluster API ignores silently.
const DefaultReadTimeout = 3 * time.Second

// maxRequestBytes bounds the request body read: a Cluster is at most what
// etcd stores (1.5 MiB by default), and the rest of a request is small.
const maxRequestBytes = 3 << 20

// Paths of the extension's endpoints, computed as Cluster API's runtime
// client computes them (catalog.GVHToPath: group, version, lowercase hook,
// handler name).
var (
	// DiscoveryPath is /hooks.runtime.cluster.x-k8s.io/v1alpha1/discovery.
	DiscoveryPath = catalog.GVHToPath(hookOf(runtimehooksv1.Discovery), "")
	// BeforeClusterUpgradePath is
	// /hooks.runtime.cluster.x-k8s.io/v1alpha1/beforeclusterupgrade/wave-hold.
	BeforeClusterUpgradePath = catalog.GVHToPath(hookOf(runtimehooksv1.BeforeClusterUpgrade), HandlerName)
)

// hookOf is the GroupVersionHook of one of Cluster API's v1alpha1 hooks.
func hookOf(hook catalog.Hook) catalog.GroupVersionHook {
	return catalog.GroupVersionHook{Group: runtimehooksv1.GroupVersion.Group, Version: runtimehooksv1.GroupVersion.Version, Hook: catalog.HookName(hook)}
}

// Registrar is a server that serves handlers by path: the guard's webhook
// server (controller-runtime's webhook.Server).
type Registrar interface {
	Register(path string, hook http.Handler)
}

// Extension serves the discovery and BeforeClusterUpgrade endpoints.
type Extension struct {
	// Reader lists Clusters with their status: an uncached reader (the
	// manager's APIReader), since the guard's cache drops Clusters' status.
	Reader client.Reader
	// Soak is how long a Cluster of an earlier wave must have stayed done
	// before a later wave starts (--wave-soak).
	Soak time.Duration
	// Log receives one line per answer that matters (releases, fail-open
	// answers, unreadable requests; held answers at V(1)).
	Log logr.Logger
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// ReadTimeout bounds one call's List; zero means DefaultReadTimeout.
	ReadTimeout time.Duration
}

// Register serves the extension's endpoints on server, at DiscoveryPath
// and BeforeClusterUpgradePath.
func (e *Extension) Register(server Registrar) {
	server.Register(DiscoveryPath, http.HandlerFunc(e.ServeDiscovery))
	server.Register(BeforeClusterUpgradePath, http.HandlerFunc(e.ServeBeforeClusterUpgrade))
}

// Discovery is the answer to Cluster API's discovery call: one handler of
// BeforeClusterUpgrade, HandlerName, whose failures (no answer, a timeout)
// Cluster API ignores, so that a guard that is down holds no upgrade.
func Discovery() *runtimehooksv1.DiscoveryResponse {
	hook := hookOf(runtimehooksv1.BeforeClusterUpgrade)
	resp := &runtimehooksv1.DiscoveryResponse{
		TypeMeta: typeMeta("DiscoveryResponse"),
		Handlers: []runtimehooksv1.ExtensionHandler{{
			Name:           HandlerName,
			RequestHook:    runtimehooksv1.GroupVersionHook{APIVersion: hook.GroupVersion().String(), Hook: hook.Hook},
			TimeoutSeconds: ptr.To[int32](TimeoutSeconds),
			FailurePolicy:  ptr.To(runtimehooksv1.FailurePolicyIgnore),
		}},
	}
	resp.Status = runtimehooksv1.ResponseStatusSuccess
	return resp
}

// ServeDiscovery answers Cluster API's discovery call (Discovery).
func (e *Extension) ServeDiscovery(w http.ResponseWriter, r *http.Request) {
	if !posted(w, r) {
		return
	}
	var req runtimehooksv1.DiscoveryRequest
	if err := decode(w, r, &req, &req.TypeMeta, "DiscoveryRequest"); err != nil {
		countAnswer(OutcomeBadRequest)
		e.Log.Info("answering a discovery request the guard cannot read with a Failure", "remote", r.RemoteAddr, "error", err.Error())
		resp := &runtimehooksv1.DiscoveryResponse{TypeMeta: typeMeta("DiscoveryResponse")}
		resp.Status, resp.Message = runtimehooksv1.ResponseStatusFailure, "rollout-guard cannot read this discovery request: "+err.Error()
		respond(w, resp)
		return
	}
	respond(w, Discovery())
}

// ServeBeforeClusterUpgrade answers a BeforeClusterUpgrade call: a Success
// with retryAfterSeconds > 0 and a message naming the holder while an
// earlier wave holds the Cluster (Decide), a Success with
// retryAfterSeconds 0 otherwise (also when the Clusters cannot be read),
// a Failure for a request the guard cannot read.
func (e *Extension) ServeBeforeClusterUpgrade(w http.ResponseWriter, r *http.Request) {
	if !posted(w, r) {
		return
	}
	resp := &runtimehooksv1.BeforeClusterUpgradeResponse{TypeMeta: typeMeta("BeforeClusterUpgradeResponse")}
	var req runtimehooksv1.BeforeClusterUpgradeRequest
	err := decode(w, r, &req, &req.TypeMeta, "BeforeClusterUpgradeRequest")
	if err == nil {
		err = complete(&req)
	}
	if err != nil {
		countAnswer(OutcomeBadRequest)
		e.Log.Info("answering a BeforeClusterUpgrade request the guard cannot read with a Failure", "remote", r.RemoteAddr, "error", err.Error())
		resp.Status, resp.Message = runtimehooksv1.ResponseStatusFailure, "rollout-guard cannot read this BeforeClusterUpgrade request: "+err.Error()
		respond(w, resp)
		return
	}
	d := e.decide(r.Context(), &req)
	countAnswer(d.Outcome)
	resp.Status, resp.Message = runtimehooksv1.ResponseStatusSuccess, d.Message
	resp.RetryAfterSeconds = int32(d.RetryAfter / time.Second)
	log := e.Log.WithValues("cluster", req.Cluster.Namespace+"/"+req.Cluster.Name, "fromVersion", req.FromKubernetesVersion, "toVersion", req.ToKubernetesVersion,
		"outcome", d.Outcome, "retryAfterSeconds", resp.RetryAfterSeconds)
	if d.Hold {
		log.V(1).Info("holding a cluster's upgrade for an earlier wave", "message", d.Message)
	} else if d.Outcome != OutcomeFailedOpen {
		log.Info("letting a cluster's upgrade go", "message", d.Message)
	}
	respond(w, resp)
}

// decide reads the Clusters of the requested Cluster's namespace that
// carry the wave label and decides; when they cannot be read, it lets the
// upgrade go (fails open) and says so.
func (e *Extension) decide(ctx context.Context, req *runtimehooksv1.BeforeClusterUpgradeRequest) Decision {
	ns, name := req.Cluster.Namespace, req.Cluster.Name
	timeout := e.ReadTimeout
	if timeout <= 0 {
		timeout = DefaultReadTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var list clusterv1.ClusterList
	if err := e.Reader.List(ctx, &list, client.InNamespace(ns), client.HasLabels{waves.Label}); err != nil {
		e.Log.Error(err, "could not read the clusters of a wave; not holding the upgrade (fail open)",
			"cluster", ns+"/"+name, "toVersion", req.ToKubernetesVersion, "outcome", OutcomeFailedOpen)
		return Decision{Outcome: OutcomeFailedOpen,
			Message: fmt.Sprintf("not held by rollout-guard: could not read the clusters of namespace %s, so it does not hold the upgrade: %v", ns, err)}
	}
	now := time.Now
	if e.Now != nil {
		now = e.Now
	}
	return Decide(Input{Namespace: ns, Name: name, ToVersion: req.ToKubernetesVersion, Clusters: list.Items, Soak: e.Soak, Now: now()})
}

// posted answers anything but a POST with 405 and reports whether r is a
// POST: Cluster API posts every call.
func posted(w http.ResponseWriter, r *http.Request) bool {
	if r.Method == http.MethodPost {
		return true
	}
	w.Header().Set("Allow", http.MethodPost)
	http.Error(w, "only POST", http.StatusMethodNotAllowed)
	return false
}

// decode reads r's body into obj, at most maxRequestBytes of JSON whose
// apiVersion and kind (tm, once decoded) must be the hooks' group version
// and kind: Cluster API's runtime client always sets both.
func decode(w http.ResponseWriter, r *http.Request, obj any, tm *metav1.TypeMeta, kind string) error {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxRequestBytes))
	if err != nil {
		return fmt.Errorf("reading the body: %w", err)
	}
	if err := json.Unmarshal(body, obj); err != nil {
		return fmt.Errorf("decoding the body: %w", err)
	}
	if want := typeMeta(kind); *tm != want {
		return fmt.Errorf("the body is apiVersion %q kind %q, not %s %s", tm.APIVersion, tm.Kind, want.APIVersion, want.Kind)
	}
	return nil
}

// complete checks that a BeforeClusterUpgrade request names what the
// decision needs.
func complete(req *runtimehooksv1.BeforeClusterUpgradeRequest) error {
	var missing []string
	if req.Cluster.Namespace == "" || req.Cluster.Name == "" {
		missing = append(missing, "cluster.metadata.namespace and .name")
	}
	if req.ToKubernetesVersion == "" {
		missing = append(missing, "toKubernetesVersion")
	}
	if len(missing) > 0 {
		return fmt.Errorf("%s required", strings.Join(missing, " and "))
	}
	return nil
}

// typeMeta is the apiVersion and kind of one of the hooks' types.
func typeMeta(kind string) metav1.TypeMeta {
	return metav1.TypeMeta{APIVersion: runtimehooksv1.GroupVersion.String(), Kind: kind}
}

// respond writes resp as JSON with status 200, as Cluster API's runtime
// client expects for every answer, a Failure included.
func respond(w http.ResponseWriter, resp any) {
	body, err := json.Marshal(resp)
	if err != nil {
		http.Error(w, "encoding the answer: "+err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(body)
}
