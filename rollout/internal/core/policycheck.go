package core

import (
	"context"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/rollout-guard/rollout-guard/kinds"
	"github.com/rollout-guard/rollout-guard/policy"
	"github.com/rollout-guard/rollout-guard/skew"
)

// PolicyRefusal is a change the policy refuses, found before sending it.
type PolicyRefusal struct {
	// text is the refusal as the guard words it (without the API server's
	// `admission webhook "..." denied the request: ` prefix).
	text string
	// hint is the way out, on its own line.
	hint string
	// Rules are the ids of the rules broken.
	Rules []string
}

// Error is the refusal, with the way out on its own line.
func (e *PolicyRefusal) Error() string {
	s := "rollout-guard's policy refuses this change (checked before sending; nothing was changed): " + e.text
	if e.hint != "" {
		s += "\n" + e.hint
	}
	return s
}

// ExitCode is ExitRefused.
func (e *PolicyRefusal) ExitCode() int { return ExitRefused }

// CheckPolicy judges the change of oldObj into newObj with the guard's own
// policy, reading the cluster through the CLI's live client. A refusal is a
// *PolicyRefusal with the guard's exact text; when the facts cannot be read
// (no permission to list the cluster's workers, a kind not served) it warns
// and lets the guard decide. A kind the policy does not judge passes. Warnings of the decision are printed only when
// verbose (a client dry-run): otherwise the guard returns them itself.
func (c *Session) CheckPolicy(ctx context.Context, cl *Clients, oldObj, newObj client.Object, hint string, verbose bool) error {
	if kind, ok := kinds.Of(newObj); ok && kind.Decide == nil {
		// A kind the policy does not judge (a ClusterClass): what its
		// change does is judged object by object, as the topology
		// controller writes each Cluster's control plane and pools.
		return nil
	}
	p := policy.Policy{Reader: cl.Client, Mapper: cl.Mapper, Indexed: false}
	d, warnings, err := p.Decide(ctx, oldObj, newObj)
	if err != nil {
		c.Warnf("could not check rollout-guard's policy before sending (%v); the guard decides", err)
		return nil
	}
	if verbose {
		for _, w := range append(warnings, d.Warnings...) {
			c.Warnf("%s", w)
		}
	}
	if d.Allowed() {
		return nil
	}
	return &PolicyRefusal{text: RefusalText(KindOf(newObj), newObj.GetName(), d), hint: hint, Rules: policy.RuleIDs(d)}
}

// RefusalText renders a refused decision exactly as the guard's validating
// webhook does (policy.Refusal).
func RefusalText(kind Kind, name string, d skew.Decision) string {
	if err := policy.Refusal(kind.GVK.GroupKind(), name, d, nil); err != nil {
		return err.Error()
	}
	return ""
}
