package e2e

import (
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

func toMap(obj client.Object) (map[string]any, error) {
	return runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
}

func fromMap(u map[string]any, obj client.Object) error {
	return runtime.DefaultUnstructuredConverter.FromUnstructured(u, obj)
}

// mergeInto merges src into dst as a JSON merge patch would (maps merge,
// everything else replaces).
func mergeInto(dst, src map[string]any) {
	for k, v := range src {
		if sv, ok := v.(map[string]any); ok {
			if dv, ok := dst[k].(map[string]any); ok {
				mergeInto(dv, sv)
				continue
			}
			cp := map[string]any{}
			mergeInto(cp, sv)
			dst[k] = cp
			continue
		}
		dst[k] = v
	}
}
