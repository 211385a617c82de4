package webhooks

import (
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/rollout-guard/rollout-guard/skew"
)

// toAdmission turns a Decision into what a controller-runtime validator
// returns: warnings, and for a refusal one Invalid error whose causes name
// each offending field, as Cluster API's own webhooks do. The API server shows
// it as `<Kind> "<name>" is invalid: <field>: Forbidden: <message>`.
func toAdmission(gk schema.GroupKind, name string, d skew.Decision, extra field.ErrorList, extraWarnings []string) (admission.Warnings, error) {
	warnings := append(admission.Warnings{}, extraWarnings...)
	warnings = append(warnings, d.Warnings...)
	if d.Allowed() {
		if len(warnings) == 0 {
			return nil, nil
		}
		return warnings, nil
	}
	errs := make(field.ErrorList, 0, len(d.Violations))
	for _, v := range d.Violations {
		path := fieldPath(v.Field)
		if v.Rule == skew.RuleInvalidVersion {
			errs = append(errs, field.Invalid(path, v.Value, v.String()))
			continue
		}
		errs = append(errs, field.Forbidden(path, v.String()))
	}
	errs = append(errs, extra...)
	return warnings, apierrors.NewInvalid(gk, name, errs)
}

// fieldPath turns "spec.template.spec.version" into a field.Path.
func fieldPath(dotted string) *field.Path {
	if dotted == "" {
		return field.NewPath("spec")
	}
	parts := strings.Split(dotted, ".")
	return field.NewPath(parts[0], parts[1:]...)
}
