package webhooks

import (
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/rollout-guard/rollout-guard/policy"
	"github.com/rollout-guard/rollout-guard/skew"
)

// toAdmission turns a Decision into what a controller-runtime validator
// returns: warnings, and for a refusal policy.Refusal's error.
func toAdmission(gk schema.GroupKind, name string, d skew.Decision, extra field.ErrorList, extraWarnings []string) (admission.Warnings, error) {
	warnings := append(admission.Warnings{}, extraWarnings...)
	warnings = append(warnings, d.Warnings...)
	if len(warnings) == 0 {
		warnings = nil
	}
	if d.Allowed() {
		return warnings, nil
	}
	return warnings, policy.Refusal(gk, name, d, extra)
}
