package skew

import (
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const etcdField = "spec.kubeadmConfigSpec.clusterConfiguration.etcd.local.imageTag"

// rules returns the rule ids of d's violations, sorted.
func rules(d Decision) []RuleID {
	out := make([]RuleID, 0, len(d.Violations))
	for _, v := range d.Violations {
		out = append(out, v.Rule)
	}
	slices.Sort(out)
	return out
}

// sorted returns ids sorted, never nil.
func sorted(ids ...RuleID) []RuleID {
	out := append([]RuleID{}, ids...)
	slices.Sort(out)
	return out
}

// expect is what one case asserts beyond the rule ids.
type expect struct {
	field    string   // Field of every violation, when set
	value    *string  // Value of every violation, when set
	messages []string // substrings that must each appear in some violation's String()
	warnings []string // substrings that must each appear in some warning
	noWarn   bool     // no warning at all
}

func str(s string) *string { return &s }

func check(t *testing.T, d Decision, want []RuleID, e expect) {
	t.Helper()
	require.Equal(t, sorted(want...), rules(d), "violations: %v\nwarnings: %v", d.Violations, d.Warnings)
	assert.Equal(t, len(want) == 0, d.Allowed())
	for _, v := range d.Violations {
		if e.field != "" {
			assert.Equal(t, e.field, v.Field, v.String())
		}
		if e.value != nil {
			assert.Equal(t, *e.value, v.Value, v.String())
		}
		assert.NotEmpty(t, v.Message)
		assert.NotEmpty(t, v.Remedy)
		assert.Equal(t, v.Message+" [rule "+string(v.Rule)+"]; "+v.Remedy, v.String())
	}
	for _, m := range e.messages {
		assert.True(t, slices.ContainsFunc(d.Violations, func(v Violation) bool { return strings.Contains(v.String(), m) }),
			"no violation contains %q: %v", m, d.Violations)
	}
	for _, w := range e.warnings {
		assert.True(t, slices.ContainsFunc(d.Warnings, func(s string) bool { return strings.Contains(s, w) }),
			"no warning contains %q: %v", w, d.Warnings)
	}
	if e.noWarn {
		assert.Empty(t, d.Warnings)
	}
}
