package framework

import (
	"fmt"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
)

// BuildKustomization runs kustomize, through its Go API and with its default
// options (as `kubectl kustomize dir` does), on the kustomization in dir and
// returns the objects it produces, in kustomize's output order.
func BuildKustomization(dir string) ([]*unstructured.Unstructured, error) {
	resMap, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(filesys.MakeFsOnDisk(), dir)
	if err != nil {
		return nil, fmt.Errorf("kustomize build %s: %w", dir, err)
	}
	var objs []*unstructured.Unstructured
	for _, res := range resMap.Resources() {
		// Through JSON, so that numbers are int64 or float64 as everywhere
		// else in unstructured objects.
		data, err := res.MarshalJSON()
		if err != nil {
			return nil, fmt.Errorf("kustomize build %s: encoding %s: %w", dir, res.CurId(), err)
		}
		u := &unstructured.Unstructured{}
		if err := u.UnmarshalJSON(data); err != nil {
			return nil, fmt.Errorf("kustomize build %s: decoding %s: %w", dir, res.CurId(), err)
		}
		objs = append(objs, u)
	}
	return objs, nil
}
