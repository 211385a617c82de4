package policy

import (
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/rollout-guard/rollout-guard/skew"
)

// Refusal renders a refused decision as the guard answers it: one Invalid
// error whose causes name each offending field, as Cluster API's own
// webhooks do, followed by extra. The API server shows it as
// `<Kind> "<name>" is invalid: <field>: Forbidden: <message>`; the CLI prints
// the same text when it refuses before sending. It returns nil when d allows
// the change and extra is empty.
func Refusal(gk schema.GroupKind, name string, d skew.Decision, extra field.ErrorList) error {
	errs := make(field.ErrorList, 0, len(d.Violations)+len(extra))
	for _, v := range d.Violations {
		path := fieldPath(v.Field)
		if v.Rule == skew.RuleInvalidVersion {
			errs = append(errs, field.Invalid(path, v.Value, v.String()))
			continue
		}
		errs = append(errs, field.Forbidden(path, v.String()))
	}
	errs = append(errs, extra...)
	if len(errs) == 0 {
		return nil
	}
	return apierrors.NewInvalid(gk, name, errs)
}

// fieldPath turns "spec.template.spec.version" into a field.Path.
func fieldPath(dotted string) *field.Path {
	if dotted == "" {
		return field.NewPath("spec")
	}
	parts := strings.Split(dotted, ".")
	return field.NewPath(parts[0], parts[1:]...)
}
