package plan

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	jsonpatch "github.com/evanphx/json-patch/v5"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/rollout-guard/rollout-guard/policy"
	"github.com/rollout-guard/rollout-guard/rollout/api/v1alpha1"
	"github.com/rollout-guard/rollout-guard/rollout/internal/core"
)

// localState is how a plan judges its changes: with rollout-guard's policy
// evaluated in the CLI instead of a server-side dry run (--local, or after
// a dry run was not permitted).
type localState struct {
	// on is --local.
	on bool
	// fellBack is set once a dry run was not permitted and the plan went on
	// locally; the warning is printed once.
	fellBack bool
}

// local reports whether the plan judges locally.
func (c planSession) local() bool { return c.state != nil && (c.state.on || c.state.fellBack) }

// verdictFor judges one patch of obj: by a server-side dry run, or by
// rollout-guard's policy evaluated here when the plan is local. A dry run
// the user may not send (no patch permission) makes the rest of the plan
// local, saying so once.
func (c planSession) verdictFor(ctx context.Context, cl *core.Clients, obj client.Object, pt types.PatchType, data []byte, purpose string) (v1alpha1.PlanVerdict, client.Object, error) {
	if c.local() {
		return c.localVerdict(ctx, cl, obj, pt, data, purpose)
	}
	v, answer, err := c.dryRun(ctx, cl, obj, pt, data, purpose)
	if err == nil || !apierrors.IsForbidden(err) || c.state == nil {
		return v, answer, err
	}
	c.state.fellBack = true
	c.Warnf("the server-side dry run is not permitted (%v): a dry run is authorized as the write it previews; the verdict is rollout-guard's policy evaluated here instead, as with --local: Cluster API's webhooks and the API server's validation are not asked", core.APIStatusOf(err))
	return c.localVerdict(ctx, cl, obj, pt, data, purpose)
}

// localVerdict judges the patch of obj with rollout-guard's policy, on the
// same facts the guard reads (the policy package the guard runs), read
// with get and list only. It returns the object as patched (nil when
// refused).
func (c planSession) localVerdict(ctx context.Context, cl *core.Clients, obj client.Object, pt types.PatchType, data []byte, purpose string) (v1alpha1.PlanVerdict, client.Object, error) {
	v := v1alpha1.PlanVerdict{Local: true}
	obj, err := typed(obj)
	if err != nil {
		return v, nil, fmt.Errorf("cannot %s: %w", purpose, err)
	}
	planned, err := patched(obj, pt, data)
	if err != nil {
		return v, nil, fmt.Errorf("cannot %s: %w", purpose, err)
	}
	d, warnings, err := policy.Policy{Reader: cl.Client, Mapper: cl.Mapper, Indexed: false}.Decide(ctx, obj, planned)
	if err != nil {
		return v, nil, fmt.Errorf("cannot %s: evaluating rollout-guard's policy: %w", purpose, err)
	}
	v.Warnings = append(warnings, d.Warnings...)
	if d.Allowed() {
		v.Admitted = true
		return v, planned, nil
	}
	refusal := policy.Refusal(core.KindOf(planned).GVK.GroupKind(), planned.GetName(), d, nil)
	v.RefusedBy, v.Message, v.Rules = "rollout-guard", refusal.Error(), policy.RuleIDs(d)
	var status apierrors.APIStatus
	if errors.As(refusal, &status) && status.Status().Details != nil {
		for _, cause := range status.Status().Details.Causes {
			v.Causes = append(v.Causes, cause.Field+": "+cause.Message)
		}
	}
	return v, nil, nil
}

// patched returns obj with a JSON merge patch or a JSON patch applied, as
// the API server would store it (without its defaults).
func patched(obj client.Object, pt types.PatchType, data []byte) (client.Object, error) {
	if pt == types.MergePatchType {
		return core.ApplyMergePatch(obj, data)
	}
	if pt != types.JSONPatchType {
		return nil, fmt.Errorf("a %s patch cannot be judged locally", pt)
	}
	raw, err := json.Marshal(obj)
	if err != nil {
		return nil, fmt.Errorf("encoding %s: %w", obj.GetName(), err)
	}
	p, err := jsonpatch.DecodePatch(data)
	if err != nil {
		return nil, fmt.Errorf("decoding the patch of %s: %w", obj.GetName(), err)
	}
	out, err := p.Apply(raw)
	if err != nil {
		return nil, fmt.Errorf("applying the patch to %s: %w", obj.GetName(), err)
	}
	res := core.KindOf(obj).New()
	if err := json.Unmarshal(out, res); err != nil {
		return nil, fmt.Errorf("decoding the patched %s: %w", obj.GetName(), err)
	}
	return res, nil
}

// typed returns obj as its kind's Go type (the policy judges typed
// objects); an object of a kind without one (another provider's control
// plane) stays unstructured.
func typed(obj client.Object) (client.Object, error) {
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return obj, nil
	}
	var out client.Object
	for _, k := range core.Kinds {
		if k.GVK.GroupKind() == u.GroupVersionKind().GroupKind() {
			out = k.New()
		}
	}
	if out == nil {
		return obj, nil
	}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, out); err != nil {
		return nil, fmt.Errorf("decoding %s: %w", obj.GetName(), err)
	}
	return out, nil
}
