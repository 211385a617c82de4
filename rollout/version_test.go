package rollout

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/rollout-guard/rollout-guard/rollout/internal/core"
)

// TestVersionAsked: --version alone (with connection flags written with
// their values) asks for the CLI's version; with a resource or a value it
// is the template switch's flag.
func TestVersionAsked(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want bool
	}{
		{[]string{"--version"}, true},
		{[]string{"--version", "--kubeconfig=/tmp/k"}, true},
		{[]string{"--context=prod", "--version"}, true},
		{[]string{"md/md-0", "--version", "v1.35.2"}, false},
		{[]string{"--version", "v1.35.2"}, false},
		{[]string{"--version=v1.35.2"}, false},
		{[]string{"version"}, false},
		{[]string{"-n", "prod", "--version"}, true},
		{[]string{"--kubeconfig", "/tmp/k", "--version"}, true},
		{[]string{"--namespace", "prod", "--context", "dev", "--version"}, true},
		{[]string{"--kubeconfig", "--version"}, false},
		{[]string{"--no-such-flag", "--version"}, false},
		{[]string{"-n", "prod", "md/md-0", "--version", "v1.35.2"}, false},
		{nil, false},
	} {
		assert.Equal(t, tc.want, versionAsked(tc.args, newRoot(&core.Session{}).PersistentFlags()), "%q", tc.args)
	}
}
