package e2e

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
)

// editMode is one way a client can change an object. The guard must judge
// them all the same.
type editMode string

const (
	// typedV1beta2: read, change and update the typed v1beta2 object.
	typedV1beta2 editMode = "typed-v1beta2-update"
	// unstructuredV1beta1: read, change and update the object as v1beta1,
	// converted by Cluster API's conversion webhook before the guard sees it.
	unstructuredV1beta1 editMode = "v1beta1-update"
	// mergePatch: a JSON merge patch of just the field.
	mergePatch editMode = "json-merge-patch"
	// serverSideApply: a server-side apply of just the field, under a field
	// manager named like a GitOps controller.
	serverSideApply editMode = "server-side-apply"
)

var allModes = []editMode{typedV1beta2, unstructuredV1beta1, mergePatch, serverSideApply}

// gitOpsManager is the field manager the server-side apply edits use.
const gitOpsManager = "argocd-application-controller"

// edit sets the string field at path of obj (a typed v1beta2 object naming
// what to edit) through mode, and returns the API server's answer.
func edit(t *testing.T, mode editMode, obj client.Object, value string, path ...string) error {
	t.Helper()
	ctx := context.Background()
	c := env.Client
	gvk, err := apiutil.GVKForObject(obj, c.Scheme())
	require.NoError(t, err)
	key := client.ObjectKeyFromObject(obj)

	switch mode {
	case typedV1beta2:
		fresh := obj.DeepCopyObject().(client.Object)
		require.NoError(t, c.Get(ctx, key, fresh))
		u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(fresh)
		require.NoError(t, err)
		require.NoError(t, unstructured.SetNestedField(u, value, path...))
		require.NoError(t, runtime.DefaultUnstructuredConverter.FromUnstructured(u, fresh))
		return c.Update(ctx, fresh)
	case unstructuredV1beta1:
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(gvk.GroupKind().WithVersion("v1beta1"))
		require.NoError(t, c.Get(ctx, key, u))
		require.NoError(t, unstructured.SetNestedField(u.Object, value, path...))
		return c.Update(ctx, u)
	case mergePatch:
		patch := map[string]any{}
		require.NoError(t, unstructured.SetNestedField(patch, value, path...))
		data, err := json.Marshal(patch)
		require.NoError(t, err)
		return c.Patch(ctx, obj.DeepCopyObject().(client.Object), client.RawPatch(types.MergePatchType, data))
	case serverSideApply:
		u := map[string]any{
			"apiVersion": gvk.GroupVersion().String(),
			"kind":       gvk.Kind,
			"metadata":   map[string]any{"name": key.Name, "namespace": key.Namespace},
		}
		require.NoError(t, unstructured.SetNestedField(u, value, path...))
		data, err := json.Marshal(u)
		require.NoError(t, err)
		return c.Patch(ctx, obj.DeepCopyObject().(client.Object), client.RawPatch(types.ApplyPatchType, data),
			client.FieldOwner(gitOpsManager), client.ForceOwnership)
	}
	t.Fatalf("unknown edit mode %q", mode)
	return nil
}
