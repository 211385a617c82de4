package cli

import (
	"context"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/rollout-guard/rollout-guard/test/framework"
)

// kcpGuardPrefix is how the API server prefixes the guard's refusal of a
// KubeadmControlPlane change.
const kcpGuardPrefix = `admission webhook "validate.kubeadmcontrolplane.rollout-guard.io" denied the request: `

// TestUndoEtcdDowngrade undoes a control-plane upgrade from v1.33 to v1.34,
// which would take etcd from 3.6 back to 3.5: refused locally with the
// guard's own text, refused by the guard on --dry-run=server, refused for a
// user outside the override group even with --force, let through for one in
// it, with the override and its reason in the history.
func TestUndoEtcdDowngrade(t *testing.T) {
	w := newWorld(t, "cli-undo-etcd", framework.WorldSpec{Version: "v1.33.5", WorkerVersion: "v1.33.5"})
	kcp := "kcp/" + kcpName

	out := rolloutCmd(t, kcp, "--version", "v1.34.2", "--template", "devmachinetemplate/c1-control-plane-1", "-n", w.Namespace).ok(t)
	assert.Equal(t, "kubeadmcontrolplane.controlplane.cluster.x-k8s.io/c1-control-plane rolling out: version v1.33.5 → v1.34.2; infrastructureRef c1-control-plane → c1-control-plane-1\n", out)
	waitRecorded(t, w.KCP)

	refusal := `KubeadmControlPlane.controlplane.cluster.x-k8s.io "c1-control-plane" is invalid: [` +
		`spec.version: Forbidden: KubeadmControlPlane c1-control-plane: Kubernetes downgrade from v1.34.2 to v1.33.5 is not supported by kubeadm [rule ControlPlaneDowngrade]; keep spec.version at v1.34.x or later; a control plane cannot be downgraded in place (to go back, restore from an etcd backup), ` +
		`spec.version: Forbidden: KubeadmControlPlane c1-control-plane: etcd downgrade from 3.6.5 (kubeadm's default for v1.34.2) to 3.5.24 (kubeadm's default for v1.33.5) is not supported; etcd cannot return to an older minor by replacing members [rule EtcdDowngrade]; keep etcd at 3.6: set spec.kubeadmConfigSpec.clusterConfiguration.etcd.local.imageTag to a 3.6.x tag such as 3.6.5-0, or downgrade etcd with its own procedure (etcdctl downgrade enable) outside Cluster API first]`
	hint := "To ask the guard itself, add --dry-run=server. To override (members of the guard's override groups only; recorded in the history), add --force --reason TEXT."

	// Refused before sending, with the guard's text.
	r := rolloutCmd(t, "undo", kcp, "-n", w.Namespace)
	r.refused(t, "rollout-guard's policy refuses this change (checked before sending; nothing was changed): "+refusal+"\n"+hint)
	assert.Empty(t, r.stdout)
	assert.EqualValues(t, 2, env.Stamps(t, w.KCP).Revision)

	// The guard itself says the same.
	rolloutCmd(t, "undo", kcp, "-n", w.Namespace, "--dry-run=server").refused(t, kcpGuardPrefix+refusal)

	// A client dry run shows what would change, then the refusal.
	r = rolloutCmd(t, "undo", kcp, "-n", w.Namespace, "--dry-run=client")
	r.refused(t, "rollout-guard's policy refuses this change (checked before sending; nothing was changed): "+refusal+"\n"+hint)
	golden(t, "undo/kcp-dry-run-client.txt", r.stdout)

	// --force outside the override group: the guard refuses and says why.
	rolloutAs(t, "mallory", "undo", kcp, "-n", w.Namespace, "--force", "--reason", "INC-42: roll back").refused(t, kcpGuardPrefix+
		strings.TrimSuffix(refusal, "]")+`, metadata.annotations[rollout-guard.io/override]: Forbidden: override not honoured: user mallory is not in an override group (platform-admins)]`)
	assert.EqualValues(t, 2, env.Stamps(t, w.KCP).Revision)

	// In the group: let through, with the guard's warning.
	r = rolloutAs(t, "oncall", "undo", kcp, "-n", w.Namespace, "--force", "--reason", "INC-42: roll back")
	assert.Equal(t, "kubeadmcontrolplane.controlplane.cluster.x-k8s.io/c1-control-plane rolled back to revision 1 (now revision 3)\n", lastLine(r.ok(t)))
	assert.Contains(t, r.stderr, "Warning: rollout-guard's policy refuses this change (ControlPlaneDowngrade, EtcdDowngrade); sending it with the override (--force): the guard decides whether you may\n")
	assert.Contains(t, r.stderr, "Warning: rollout-guard: override by oncall honoured (INC-42: roll back): ControlPlaneDowngrade, EtcdDowngrade; recorded in the revision history\n")
	w.Refresh(t)
	assert.Equal(t, "v1.33.5", w.KCP.Spec.Version)

	// History remembers what the control plane ran: a patch release of
	// v1.33 is still refused, against revision 2, locally as by the guard.
	historyAware := `KubeadmControlPlane.controlplane.cluster.x-k8s.io "c1-control-plane" is invalid: [` +
		`spec.version: Forbidden: KubeadmControlPlane c1-control-plane: Kubernetes downgrade from v1.34.2 (the highest version it has run, per revision 2) to v1.33.4 is not supported by kubeadm [rule ControlPlaneDowngrade]; keep spec.version at v1.34.x or later; a control plane cannot be downgraded in place (to go back, restore from an etcd backup), ` +
		`spec.version: Forbidden: KubeadmControlPlane c1-control-plane: etcd downgrade from 3.6.5 (revision 2) to 3.5.24 (kubeadm's default for v1.33.4) is not supported; etcd cannot return to an older minor by replacing members [rule EtcdDowngrade]; keep etcd at 3.6: set spec.kubeadmConfigSpec.clusterConfiguration.etcd.local.imageTag to a 3.6.x tag such as 3.6.5-0, or downgrade etcd with its own procedure (etcdctl downgrade enable) outside Cluster API first]`
	rolloutCmd(t, kcp, "--version", "v1.33.4", "-n", w.Namespace).refused(t,
		"rollout-guard's policy refuses this change (checked before sending; nothing was changed): "+historyAware+"\nTo ask the guard itself, add --dry-run=server.")
	rolloutCmd(t, kcp, "--version", "v1.33.4", "-n", w.Namespace, "--dry-run=server").refused(t, kcpGuardPrefix+historyAware)

	settle(t, w.KCP)
	golden(t, "history/kcp-override-table.txt", rolloutCmd(t, "history", kcp, "-n", w.Namespace).ok(t))
}

// TestUndo walks a MachineDeployment back and forth: the previous revision
// by default, a client dry run, "skipped rollback" when the revision is
// live, a paused object, a revision that does not exist and one whose
// template was deleted.
func TestUndo(t *testing.T) {
	w := newWorld(t, "cli-undo", framework.WorldSpec{Version: "v1.34.2", WorkerVersion: "v1.34.2"})
	md := "machinedeployment/" + mdName
	rolloutCmd(t, md, "--template", "devmachinetemplate/c1-md-1", "-n", w.Namespace).ok(t)

	r := rolloutCmd(t, "undo", md, "-n", w.Namespace, "--dry-run")
	assert.Equal(t, "MachineDeployment cli-undo/c1-md-0: would roll back from revision 2 to revision 1 (dry run: nothing sent)\n"+
		"FIELD               LIVE (REVISION 2)            REVISION 1\n"+
		"infrastructureRef   DevMachineTemplate/c1-md-1   DevMachineTemplate/c1-md-0   (rolls out)\n"+
		"machinedeployment.cluster.x-k8s.io/c1-md-0 rolled back to revision 1 (dry run)\n", r.ok(t))
	assert.EqualValues(t, 2, env.Stamps(t, w.MD).Revision)

	out := rolloutCmd(t, "undo", md, "-n", w.Namespace).ok(t)
	assert.Equal(t, "MachineDeployment cli-undo/c1-md-0: rolling back from revision 2 to revision 1\n"+
		"FIELD               LIVE (REVISION 2)            REVISION 1\n"+
		"infrastructureRef   DevMachineTemplate/c1-md-1   DevMachineTemplate/c1-md-0   (rolls out)\n"+
		"machinedeployment.cluster.x-k8s.io/c1-md-0 rolled back to revision 1 (now revision 3)\n", out, "what it sends, then what it did")
	w.Refresh(t)
	assert.Equal(t, "c1-md-0", w.MD.Spec.Template.Spec.InfrastructureRef.Name)

	out = rolloutCmd(t, "undo", md, "-n", w.Namespace, "--to-revision", "1").ok(t)
	assert.Equal(t, "machinedeployment.cluster.x-k8s.io/c1-md-0 skipped rollback: already at revision 1 (its content is live as revision 3)\n", out)
	out = rolloutCmd(t, "undo", md, "-n", w.Namespace, "--to-revision", "3", "-o", "name").ok(t)
	assert.Equal(t, "machinedeployment.cluster.x-k8s.io/c1-md-0\n", out)

	rolloutCmd(t, "undo", md, "-n", w.Namespace, "--to-revision", "7").fails(t,
		"cannot undo MachineDeployment cli-undo/c1-md-0: it has no revision 7; recorded revisions: 1, 2, 3 (see rollout history machinedeployment/c1-md-0)")

	// Revision 2's template is gone.
	tmpl := &unstructured.Unstructured{}
	tmpl.SetAPIVersion("infrastructure.cluster.x-k8s.io/v1beta2")
	tmpl.SetKind("DevMachineTemplate")
	tmpl.SetNamespace(w.Namespace)
	tmpl.SetName("c1-md-1")
	require.NoError(t, env.Client.Delete(context.Background(), tmpl))
	rolloutCmd(t, "undo", md, "-n", w.Namespace, "--to-revision", "2").fails(t,
		`cannot undo MachineDeployment cli-undo/c1-md-0 to revision 2: the infrastructure template DevMachineTemplate "c1-md-1" (spec.template.spec.infrastructureRef) does not exist in namespace "cli-undo"; recreate it, or pick another revision with --to-revision (see rollout history machinedeployment/c1-md-0)`)

	// Paused: refused, saying how to resume.
	rolloutCmd(t, "pause", md, "-n", w.Namespace).ok(t)
	rolloutCmd(t, "undo", md, "-n", w.Namespace).fails(t,
		"cannot undo MachineDeployment cli-undo/c1-md-0: it is paused (spec.paused is true), so Cluster API would not roll it out; resume it first with: rollout resume machinedeployment/c1-md-0 -n cli-undo")
	assert.EqualValues(t, 3, env.Stamps(t, w.MD).Revision)
}

// TestUndoRace runs two undos of one object to the same revision at once:
// exactly one applies; the other reports that there is nothing left to do.
// Then it forces the interleaving: a concurrent change lands between an
// undo's checks and its write, and the undo re-reads, re-checks and reports
// what happened instead of overwriting it.
func TestUndoRace(t *testing.T) {
	w := newWorld(t, "cli-undo-race", framework.WorldSpec{Version: "v1.34.2", WorkerVersion: "v1.34.2"})
	md := "machinedeployment/" + mdName
	rolloutCmd(t, md, "--template", "devmachinetemplate/c1-md-1", "-n", w.Namespace).ok(t)

	// Two at once.
	var wg sync.WaitGroup
	results := make([]result, 2)
	for i := range results {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i] = rolloutCmd(t, "undo", md, "-n", w.Namespace, "--to-revision", "1")
		}()
	}
	wg.Wait()
	applied, skipped := 0, 0
	for _, r := range results {
		require.Equal(t, 0, r.code, r.stderr)
		switch lastLine(r.stdout) {
		case "machinedeployment.cluster.x-k8s.io/c1-md-0 rolled back to revision 1 (now revision 3)\n":
			applied++
		case "machinedeployment.cluster.x-k8s.io/c1-md-0 skipped rollback: already at revision 1 (its content is live as revision 3)\n":
			skipped++
		default:
			t.Errorf("unexpected output %q", r.stdout)
		}
	}
	assert.Equal(t, 1, applied, "exactly one undo applies")
	assert.Equal(t, 1, skipped, "the other one skips")
	assert.EqualValues(t, 3, env.Stamps(t, w.MD).Revision, "one new revision, not two")

	// The same, interleaved on purpose: B runs to completion between A's
	// checks and A's write; A's write conflicts, A reads again and finds
	// its revision live.
	rolloutCmd(t, md, "--template", "devmachinetemplate/c1-md-1", "-n", w.Namespace).ok(t) // revision 4
	concurrently := func(args ...string) func(ctx context.Context) error {
		done := false
		return func(ctx context.Context) error {
			if !done {
				done = true
				rolloutCmd(t, args...).ok(t)
			}
			return nil
		}
	}
	r := runCLI(t, runOptions{user: "admin", beforeWrite: concurrently("undo", md, "-n", w.Namespace, "--to-revision", "1")},
		"undo", md, "-n", w.Namespace, "--to-revision", "1")
	assert.Equal(t, "machinedeployment.cluster.x-k8s.io/c1-md-0 skipped rollback: already at revision 1 (its content is live as revision 5)\n", lastLine(r.ok(t)))
	assert.Equal(t, "conflict: MachineDeployment cli-undo-race/c1-md-0 changed after it was read: it is now at revision 5, made by admin via rollout; reading it again\n", r.stderr)
	assert.EqualValues(t, 5, env.Stamps(t, w.MD).Revision)

	// Undo to "the previous revision" while someone else changes the
	// object: the previous revision is no longer what it was; nothing is
	// rolled back.
	r = runCLI(t, runOptions{user: "admin", beforeWrite: concurrently(md, "--template", "devmachinetemplate/c1-md-1", "--version", "v1.34.1", "-n", w.Namespace)},
		"undo", md, "-n", w.Namespace)
	r.fails(t, `cannot undo MachineDeployment cli-undo-race/c1-md-0: it changed while this command ran: it is now at revision 6, made by admin via rollout (rollout machinedeployment/c1-md-0 --template devmachinetemplate/c1-md-1 --version v1.34.1); "the previous revision" no longer means revision 4 (also 2), so nothing was rolled back: run rollout undo again to decide on the new state, or name the revision with --to-revision`)
	w.Refresh(t)
	assert.Equal(t, "v1.34.1", w.MD.Spec.Template.Spec.Version, "the concurrent change stands")

	// An explicit revision while someone else changes the object: checked
	// again against the new state, then applied.
	r = runCLI(t, runOptions{user: "admin", beforeWrite: concurrently(md, "--template", "devmachinetemplate/c1-md-0", "--version", "v1.34.1", "-n", w.Namespace)},
		"undo", md, "-n", w.Namespace, "--to-revision", "4")
	assert.Equal(t, "machinedeployment.cluster.x-k8s.io/c1-md-0 rolled back to revision 4 (now revision 8)\n", lastLine(r.ok(t)))
	assert.Equal(t, "conflict: MachineDeployment cli-undo-race/c1-md-0 changed after it was read: it is now at revision 7, made by admin via rollout; checking revision 4 against it again\n", r.stderr)
	require.NoError(t, env.Client.Get(context.Background(), client.ObjectKeyFromObject(w.MD), w.MD))
	assert.Equal(t, "c1-md-1", w.MD.Spec.Template.Spec.InfrastructureRef.Name)
	assert.Equal(t, "v1.34.2", w.MD.Spec.Template.Spec.Version)
}
