package cli

import (
	"strings"
	"testing"
)

// TestHelp pins the help of every command, exit codes included.
func TestHelp(t *testing.T) {
	for _, verb := range []string{"", "restart", "pause", "resume", "history", "undo", "status", "plan"} {
		name := verb
		if name == "" {
			name = "rollout"
		}
		t.Run(name, func(t *testing.T) {
			args := strings.Fields(verb + " --help")
			out := rolloutCmd(t, args...).ok(t)
			golden(t, "help/"+name+".txt", strings.ReplaceAll(out, cacheDir, "$HOME/.kube/cache"))
		})
	}
}
