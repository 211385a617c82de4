package plan

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
	"k8s.io/kube-openapi/pkg/validation/spec"
	"k8s.io/kube-openapi/pkg/validation/strfmt"
	"k8s.io/kube-openapi/pkg/validation/validate"
)

// planSchema is the documented schema of `rollout plan -o json`,
// rollout/api/v1alpha1/plan.schema.json, loaded once with the validator the product's
// unit test of the schema uses (kube-openapi's).
var planSchema struct {
	once      sync.Once
	mu        sync.Mutex // Validate is not documented as safe for concurrent use
	validator *validate.SchemaValidator
	err       error
}

// requireSchemaValid fails the test unless out, the output of a real
// `rollout plan -o json`, validates against rollout/api/v1alpha1/plan.schema.json.
func requireSchemaValid(t *testing.T, out string) {
	t.Helper()
	planSchema.once.Do(func() {
		planSchema.validator, planSchema.err = loadPlanSchema(filepath.Join(sb.Env.RepoRoot, "rollout", "api", "v1alpha1", "plan.schema.json"))
	})
	require.NoError(t, planSchema.err)
	var doc any
	require.NoError(t, json.Unmarshal([]byte(out), &doc), out)
	planSchema.mu.Lock()
	res := planSchema.validator.Validate(doc)
	planSchema.mu.Unlock()
	require.True(t, res.IsValid(), "the plan does not match rollout/api/v1alpha1/plan.schema.json: %v\n%s", res.Errors, out)
}

// loadPlanSchema reads the schema at path, inlines its references
// (kube-openapi's validator does not follow them) and checks that it
// refuses what is no plan, so that a schema read wrong cannot pass
// everything.
func loadPlanSchema(path string) (*validate.SchemaValidator, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var doc map[string]any
	if err := json.Unmarshal(raw, &doc); err != nil {
		return nil, fmt.Errorf("decoding %s: %w", path, err)
	}
	defs, _ := doc["definitions"].(map[string]any)
	inlined, err := inlineRefs(doc, defs, 0)
	if err != nil {
		return nil, fmt.Errorf("inlining the references of %s: %w", path, err)
	}
	expanded, err := json.Marshal(inlined)
	if err != nil {
		return nil, fmt.Errorf("encoding %s: %w", path, err)
	}
	s := &spec.Schema{}
	if err := json.Unmarshal(expanded, s); err != nil {
		return nil, fmt.Errorf("reading %s as a schema: %w", path, err)
	}
	v := validate.NewSchemaValidator(s, nil, "", strfmt.Default)
	for what, bad := range map[string]any{
		"an empty object": map[string]any{},
		"an undocumented key": map[string]any{"apiVersion": "rollout.rollout-guard.io/v1alpha1", "kind": "RolloutPlan",
			"change": "", "admitted": true, "replacesMachines": false, "objects": []any{}, "extra": 1},
		"an object plan without its fields": map[string]any{"apiVersion": "rollout.rollout-guard.io/v1alpha1", "kind": "RolloutPlan",
			"change": "", "admitted": true, "replacesMachines": false, "objects": []any{map[string]any{}}},
	} {
		if v.Validate(bad).IsValid() {
			return nil, fmt.Errorf("%s accepts %s: it was not read as the schema of a plan", path, what)
		}
	}
	return v, nil
}

// inlineRefs replaces every {"$ref": "#/definitions/NAME"} in v by that
// definition and drops the definitions and $schema keys.
func inlineRefs(v any, defs map[string]any, depth int) (any, error) {
	if depth > 20 {
		return nil, errors.New("recursive schema")
	}
	switch x := v.(type) {
	case map[string]any:
		if ref, ok := x["$ref"].(string); ok {
			name, found := strings.CutPrefix(ref, "#/definitions/")
			def, ok := defs[name]
			if !found || !ok {
				return nil, fmt.Errorf("no definition for reference %s", ref)
			}
			return inlineRefs(def, defs, depth+1)
		}
		out := map[string]any{}
		for k, e := range x {
			if k == "definitions" || k == "$schema" {
				continue
			}
			var err error
			if out[k], err = inlineRefs(e, defs, depth+1); err != nil {
				return nil, err
			}
		}
		return out, nil
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			var err error
			if out[i], err = inlineRefs(e, defs, depth+1); err != nil {
				return nil, err
			}
		}
		return out, nil
	}
	return v, nil
}
