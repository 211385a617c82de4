package cli

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	rbacv1 "k8s.io/api/rbac/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/rollout-guard/rollout-guard/test/framework"
)

var transcripts = flag.String("transcripts", "", "also write the tour's terminal transcripts, unaltered, to this directory (for the CLI pages of docs/)")

// session records a terminal session of the CLI: each command as typed
// (without the --kubeconfig the tests add) and its output, stdout and
// stderr interleaved.
type session struct {
	t       *testing.T
	buf     bytes.Buffer
	base    time.Time
	step    int
	objects []client.Object
}

func newSession(t *testing.T, objects ...client.Object) *session {
	s := &session{t: t, base: time.Now().UTC().Truncate(time.Second), objects: objects}
	t.Cleanup(func() { setNow(time.Time{}) })
	return s
}

// run runs one command as user; with status it also shows `echo $?`.
func (s *session) run(user string, status bool, args ...string) result {
	s.t.Helper()
	if len(args) > 0 && args[0] == "history" {
		settle(s.t, s.objects...)
	} else {
		s.step++
		setNow(s.base.Add(time.Duration(s.step) * time.Minute))
	}
	line := "$ rollout " + shellJoin(args)
	if user != "admin" {
		line += "    # as " + user
	}
	s.buf.WriteString(line + "\n")
	r := runCLI(s.t, runOptions{user: user, tee: &s.buf}, args...)
	if status {
		fmt.Fprintf(&s.buf, "$ echo $?\n%d\n", r.code)
	}
	return r
}

// save pins the transcript as testdata/tour/name, with what changes from
// run to run replaced, and writes it unaltered to -transcripts.
func (s *session) save(name string) {
	s.t.Helper()
	golden(s.t, "tour/"+name, stable(s.buf.String()))
	if *transcripts != "" {
		require.NoError(s.t, os.MkdirAll(*transcripts, 0o755))
		require.NoError(s.t, os.WriteFile(filepath.Join(*transcripts, name), s.buf.Bytes(), 0o644))
	}
	s.buf.Reset()
}

func shellJoin(args []string) string {
	out := make([]string, len(args))
	for i, a := range args {
		if a == "" || strings.ContainsAny(a, " '\"$;&|<>*?()") {
			out[i] = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
		} else {
			out[i] = a
		}
	}
	return strings.Join(out, " ")
}

// TestTour is the session the CLI pages of docs/ show: every verb on a worker pool
// and a control plane, the policy's refusals, the break-glass override and
// a topology-managed cluster. Its transcripts are pinned in testdata/tour.
func TestTour(t *testing.T) {
	w := newWorld(t, "demo", framework.WorldSpec{Version: "v1.33.5", WorkerVersion: "v1.33.5"})
	s := newSession(t, w.MD, w.KCP)
	md, kcp := "machinedeployment/"+mdName, "kcp/"+kcpName

	s.run("admin", false, "restart", md, "-n", "demo").ok(t)
	s.run("admin", false, "restart", kcp, "-n", "demo", "--at", "2030-01-02T03:00:00Z", "--yes").ok(t)
	s.run("admin", false, md, "-n", "demo", "--yes").ok(t)
	// The guard stamps a restart with the second it was asked in, and
	// history lists restarts of one second by their rollout.after: in the
	// next second, the control plane's restarts are listed in the order
	// asked, whatever second the ones above fell in.
	time.Sleep(time.Until(time.Now().Truncate(time.Second).Add(time.Second)))
	s.run("admin", false, "restart", "cluster/c1", "-n", "demo", "--yes").ok(t)
	s.save("restart.txt")

	s.run("admin", false, "pause", md, "-n", "demo").ok(t)
	s.run("admin", true, "pause", md, "-n", "demo").ok(t)
	s.run("admin", true, "restart", md, "-n", "demo")
	s.run("admin", false, "resume", md, "-n", "demo").ok(t)
	s.run("admin", false, "pause", kcp, "-n", "demo").ok(t)
	s.run("admin", false, "resume", kcp, "-n", "demo").ok(t)
	s.run("admin", false, "pause", "md", "-l", "pool=md-0", "-n", "demo").ok(t)
	s.run("admin", false, "resume", "md", "-l", "pool=md-0", "-n", "demo").ok(t)
	s.save("pause.txt")

	s.run("admin", false, md, "--template", "devmachinetemplate/c1-md-1", "-n", "demo", "--dry-run=client").ok(t)
	s.run("admin", false, md, "--template", "devmachinetemplate/c1-md-1", "-n", "demo").ok(t)
	s.run("admin", true, md, "--version", "v1.34.2", "-n", "demo")
	s.run("admin", false, kcp, "--version", "v1.34.2", "--template", "devmachinetemplate/c1-control-plane-1", "-n", "demo", "--change-cause", "upgrade to v1.34 (CHG-1234)").ok(t)
	s.run("admin", false, md, "--version", "v1.34.2", "--bootstrap-template", "kubeadmconfigtemplate/c1-md-1", "-n", "demo").ok(t)
	s.run("admin", false, md, "--template", "devmachinetemplate/c1-md-9", "-n", "demo")
	s.run("admin", false, md, "--template", "kubeadmconfigtemplate/c1-md-1", "-n", "demo")
	s.save("template.txt")

	s.run("admin", false, "history", md, "-n", "demo").ok(t)
	s.run("admin", false, "history", kcp, "-n", "demo").ok(t)
	s.run("admin", false, "history", md, "-n", "demo", "--revision", "2").ok(t)
	s.run("admin", false, "history", md, "-n", "demo", "--diff").ok(t)
	s.save("history.txt")

	s.run("admin", false, "undo", md, "-n", "demo", "--dry-run=client").ok(t)
	s.run("admin", false, "undo", md, "-n", "demo").ok(t)
	s.run("admin", true, "undo", md, "-n", "demo", "--to-revision", "2").ok(t)
	s.run("admin", true, "undo", kcp, "-n", "demo")
	s.run("admin", false, "undo", kcp, "-n", "demo", "--dry-run=server")
	s.run("mallory", false, "undo", kcp, "-n", "demo", "--force", "--reason", "INC-42: 1.34 breaks the CSI driver")
	s.run("oncall", false, "undo", kcp, "-n", "demo", "--force", "--reason", "INC-42: 1.34 breaks the CSI driver").ok(t)
	s.run("admin", false, "history", kcp, "-n", "demo").ok(t)
	s.save("undo.txt")

	grantViewer(t, "demo", []rbacv1.PolicyRule{
		{APIGroups: []string{"cluster.x-k8s.io"}, Resources: []string{"machinedeployments"}, Verbs: []string{"get", "list"}},
	}, w.MD)
	s.run("admin", true, "restart", "deployment/web", "-n", "demo")
	s.run("admin", false, "restart", "md/c1-md-7", "-n", "demo")
	s.run("viewer", false, "pause", md, "-n", "demo")
	s.save("errors.txt")

	tw := newWorld(t, "demo-topology", framework.WorldSpec{Version: "v1.34.2", WorkerVersion: "v1.34.2", Topology: true})
	s = newSession(t, tw.MD, tw.KCP)
	s.run("admin", false, "restart", md, "-n", "demo-topology").ok(t)
	s.run("admin", false, "restart", kcp, "-n", "demo-topology", "--yes").ok(t)
	s.run("admin", false, "undo", md, "-n", "demo-topology")
	s.run("admin", false, "pause", kcp, "-n", "demo-topology")
	s.save("topology.txt")
}
