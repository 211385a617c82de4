package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"reflect"
	"strconv"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/config"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	rgv1alpha1 "github.com/rollout-guard/rollout-guard/api/v1alpha1"
)

// RecordPrefix is the path prefix of the recording floor's mutating paths.
const RecordPrefix = "/record"

// revisionFields are, per kind, the spec fields a revision is made of, as
// the guard defines a revision (revisions.KindMachineDeployment and the
// others): a change of any of them is a new revision; a change of labels,
// annotations, replicas or status is not. Other kinds record nothing here.
var revisionFields = map[string][]string{
	"MachineDeployment":   {"template"},
	"MachinePool":         {"template"},
	"KubeadmControlPlane": {"version", "machineTemplate", "kubeadmConfigSpec"},
}

// replacedRevision tells whether the update from oldRaw to newRaw (objects
// of kind, as JSON) makes a new revision, and returns the revision it
// replaces: the old object's revision fields as one JSON object, the
// content the guard records. Fields are compared by value, not by their
// bytes. A kind without revision fields never makes one.
func replacedRevision(kind string, oldRaw, newRaw []byte) (replaced []byte, making bool, err error) {
	fields, ok := revisionFields[kind]
	if !ok || len(oldRaw) == 0 {
		return nil, false, nil
	}
	var oldObj, newObj struct {
		Spec map[string]json.RawMessage `json:"spec"`
	}
	if err := json.Unmarshal(oldRaw, &oldObj); err != nil {
		return nil, false, fmt.Errorf("decoding the old object: %w", err)
	}
	if err := json.Unmarshal(newRaw, &newObj); err != nil {
		return nil, false, fmt.Errorf("decoding the object: %w", err)
	}
	content := map[string]json.RawMessage{}
	for _, f := range fields {
		o, n := oldObj.Spec[f], newObj.Spec[f]
		if o != nil {
			content[f] = o
		}
		if !making {
			same, err := jsonEqual(o, n)
			if err != nil {
				return nil, false, fmt.Errorf("spec.%s: %w", f, err)
			}
			making = !same
		}
	}
	if !making {
		return nil, false, nil
	}
	replaced, err = json.Marshal(content)
	if err != nil {
		return nil, false, err
	}
	return replaced, true, nil
}

// jsonEqual compares two JSON values by value; an absent value equals
// null.
func jsonEqual(a, b json.RawMessage) (bool, error) {
	var va, vb any
	if len(a) > 0 {
		if err := json.Unmarshal(a, &va); err != nil {
			return false, err
		}
	}
	if len(b) > 0 {
		if err := json.Unmarshal(b, &vb); err != nil {
			return false, err
		}
	}
	return reflect.DeepEqual(va, vb), nil
}

// recorder is the recording floor: the stamping floor (stamp) that also,
// for every update that makes a new revision, creates one RolloutRevision
// holding the revision the update replaces, owned by the object, right
// after answering the call, as the guard records it. It does nothing else: no
// read, no list, no numbering, no pruning.
type recorder struct {
	c client.Client
}

// newRecorder makes the recorder's client from --kubeconfig, as the guard
// makes its own (ctrl.GetConfig: no client-side rate limit).
func newRecorder() (*recorder, error) {
	cfg, err := config.GetConfig()
	if err != nil {
		return nil, fmt.Errorf("loading the kubeconfig: %w", err)
	}
	scheme := runtime.NewScheme()
	if err := rgv1alpha1.AddToScheme(scheme); err != nil {
		return nil, err
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return nil, fmt.Errorf("creating the client: %w", err)
	}
	return &recorder{c: c}, nil
}

// Labels and annotations of the recording floor's RolloutRevisions: the
// guard's keys (revisions.LabelOwnerKind and the others) under the
// benchmark's prefix, but for the owner's UID, which carries the guard's
// own key (revisions.LabelOwnerUID): the guard's registration calls its
// owner-label webhook on every RolloutRevision whose owner-uid label
// differs from its owner, which the guard's records never do, so neither
// must these. bench-admission deletes them after each of its slices
// (selecting recordLabelHash), so the guard never meets them.
const (
	recordLabelOwnerUID  = "rollout-guard.io/owner-uid"
	recordLabelOwnerKind = "rollout-bench/owner-kind"
	recordLabelHash      = "rollout-bench/hash"
	recordLabelRevision  = "rollout-bench/revision"
	recordRevHistory     = "rollout-bench/revision-history"
)

// rolloutRevision is the RolloutRevision recording content, replaced by
// an update of the object req is about: named "<owner>-<hash>" as the
// guard names its records (revisions.Name), with the owner's UID, kind,
// the content's hash and its revision number as labels, the stamps the
// replaced content was made live with (the old object's, or the
// stamping floor's when it has none) and its revision history as
// annotations, and a controller owner reference to the object.
func rolloutRevision(req admission.Request, content []byte) (*rgv1alpha1.RolloutRevision, error) {
	var old struct {
		Metadata struct {
			UID         types.UID         `json:"uid"`
			Annotations map[string]string `json:"annotations"`
		} `json:"metadata"`
	}
	if err := json.Unmarshal(req.OldObject.Raw, &old); err != nil {
		return nil, fmt.Errorf("decoding the old object: %w", err)
	}
	sum := sha256.Sum256(content)
	hash := hex.EncodeToString(sum[:])[:10]
	ann := map[string]string{}
	for k, v := range old.Metadata.Annotations {
		if strings.HasPrefix(k, "rollout-bench/") && k != "rollout-bench/probe" && k != "rollout-bench/mutated" {
			ann[k] = v
		}
	}
	if len(ann) == 0 {
		ann = stampValues(req)
	}
	n, _ := strconv.ParseInt(ann["rollout-bench/revision"], 10, 64)
	ann[recordRevHistory] = strconv.FormatInt(n, 10)
	gv := req.Kind.Group + "/" + req.Kind.Version
	rr := &rgv1alpha1.RolloutRevision{
		ObjectMeta: metav1.ObjectMeta{
			Name:      req.Name + "-" + hash,
			Namespace: req.Namespace,
			Labels: map[string]string{
				recordLabelOwnerUID:  string(old.Metadata.UID),
				recordLabelOwnerKind: req.Kind.Kind,
				recordLabelHash:      hash,
				recordLabelRevision:  strconv.FormatInt(n, 10),
			},
			Annotations: ann,
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: gv, Kind: req.Kind.Kind, Name: req.Name, UID: old.Metadata.UID, Controller: new(true),
			}},
		},
		Data:     runtime.RawExtension{Raw: content},
		Revision: n,
	}
	return rr, nil
}

// handle stamps as the stamping floor does and, when the update makes a
// new revision and is not a dry run, records the replaced one once the
// call is answered, as the guard does (its history reconciler records a
// revision right after the edit that made it live; the mutating call
// writes only when the next edit comes first). A record that already
// exists (the same content replaced again) is kept, as the guard's
// recording is idempotent; any other failure is logged, and shows in the
// benchmark's count of RolloutRevision creates per revision.
func (r *recorder) handle(_ context.Context, req admission.Request) admission.Response {
	content, making, err := replacedRevision(req.Kind.Kind, req.OldObject.Raw, req.Object.Raw)
	if err != nil {
		return admission.Errored(http.StatusBadRequest, fmt.Errorf("noop-webhook: %w", err))
	}
	if making && (req.DryRun == nil || !*req.DryRun) {
		rr, err := rolloutRevision(req, content)
		if err != nil {
			return admission.Errored(http.StatusBadRequest, fmt.Errorf("noop-webhook: %w", err))
		}
		go r.create(rr)
	}
	return stampWith(req, recordMutation)
}

// create creates rr, as the guard's reconciler does after an edit.
func (r *recorder) create(rr *rgv1alpha1.RolloutRevision) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := r.c.Create(ctx, rr); err != nil && !apierrors.IsAlreadyExists(err) {
		fmt.Fprintf(os.Stderr, "noop-webhook: recording %s: %v\n", rr.Name, err)
	}
}

// recordMutation is the value of the probe's mutation on the recording
// floor's paths, so that the benchmark tells them from the others.
const recordMutation = "record"
