package core

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	jsonpatch "github.com/evanphx/json-patch/v5"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/rollout-guard/rollout-guard/revisions"
)

// Writing: every change is one JSON merge patch with a resourceVersion
// precondition and the change-cause, sent with the CLI's field manager,
// or applied locally for the policy's check before it is sent.

// DryRun is the --dry-run mode.
type DryRun string

// The --dry-run modes, as kubectl names them.
const (
	DryRunNone   DryRun = "none"
	DryRunClient DryRun = "client"
	DryRunServer DryRun = "server"
)

// ParseDryRun reads --dry-run: none, client or server ("" is none).
func ParseDryRun(s string) (DryRun, error) {
	switch DryRun(s) {
	case DryRunNone, DryRunClient, DryRunServer:
		return DryRun(s), nil
	case "":
		return DryRunNone, nil
	}
	return "", fmt.Errorf(`--dry-run must be "none", "client" or "server", not %q`, s)
}

// PatchOf builds a JSON merge patch: the resourceVersion precondition, the
// annotations to set (nil values remove a key) and the spec changes.
func PatchOf(resourceVersion string, annotations map[string]any, spec map[string]any) ([]byte, error) {
	md := map[string]any{}
	if resourceVersion != "" {
		md["resourceVersion"] = resourceVersion
	}
	if len(annotations) > 0 {
		md["annotations"] = annotations
	}
	p := map[string]any{}
	if len(md) > 0 {
		p["metadata"] = md
	}
	if len(spec) > 0 {
		p["spec"] = spec
	}
	data, err := json.Marshal(p)
	if err != nil {
		return nil, fmt.Errorf("encoding the patch: %w", err)
	}
	return data, nil
}

// CauseAnnotations are the annotations every write carries.
func CauseAnnotations(cause string) map[string]any {
	if cause == "" {
		return nil
	}
	return map[string]any{revisions.AnnotationChangeCause: cause}
}

// Send sends one patch of obj (which receives the API server's answer),
// with the CLI's field manager; server dry-run when dry is DryRunServer.
func (c *Session) Send(ctx context.Context, cl *Clients, obj client.Object, pt types.PatchType, data []byte, dry DryRun, purpose string) error {
	if c.BeforeWrite != nil {
		if err := c.BeforeWrite(ctx, obj.DeepCopyObject().(client.Object)); err != nil {
			return fmt.Errorf("cannot %s: %w", purpose, err)
		}
	}
	opts := []client.PatchOption{client.FieldOwner(FieldManager)}
	if dry == DryRunServer {
		opts = append(opts, client.DryRunAll)
	}
	kind := KindOf(obj)
	err := cl.Client.Patch(ctx, obj, client.RawPatch(pt, data), opts...)
	return Call{Verb: "patch", GR: kind.GroupResource(), Kind: kind.GVK.Kind, Namespace: obj.GetNamespace(), Name: obj.GetName(), Purpose: purpose}.Explain(err)
}

// ApplyMergePatch returns obj with a JSON merge patch (RFC 7386) applied,
// as the API server would store it, for a local policy check.
func ApplyMergePatch(obj client.Object, patch []byte) (client.Object, error) {
	raw, err := json.Marshal(obj)
	if err != nil {
		return nil, fmt.Errorf("encoding %s: %w", obj.GetName(), err)
	}
	merged, err := jsonpatch.MergePatch(raw, patch)
	if err != nil {
		return nil, fmt.Errorf("applying the patch to %s: %w", obj.GetName(), err)
	}
	out := KindOf(obj).New()
	if err := json.Unmarshal(merged, out); err != nil {
		return nil, fmt.Errorf("decoding the patched %s: %w", obj.GetName(), err)
	}
	return out, nil
}

// OperationName is how NamePrinter names an object: "machinedeployment.cluster.x-k8s.io/md-0".
func OperationName(obj client.Object) string {
	kind := KindOf(obj)
	return strings.ToLower(kind.GVK.Kind) + "." + kind.GVK.Group + "/" + obj.GetName()
}
