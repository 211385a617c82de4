package fleet

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	rgv1alpha1 "github.com/rollout-guard/rollout-guard/api/v1alpha1"
	"github.com/rollout-guard/rollout-guard/rollout"
	"github.com/rollout-guard/rollout-guard/rollout/api/v1alpha1"
	"github.com/rollout-guard/rollout-guard/test/builder"
	"github.com/rollout-guard/rollout-guard/test/framework"
	"github.com/rollout-guard/rollout-guard/test/sandbox"
)

const (
	// rolloutTimeout bounds a wait for the controllers.
	rolloutTimeout = 6 * time.Minute
	pollInterval   = 500 * time.Millisecond
)

// cli runs the rollout CLI in-process against the sandbox.
func cli(t *testing.T, args ...string) sandbox.CLIRun {
	t.Helper()
	run := sb.RunCLI(t.TempDir(), sandbox.DefaultNamespace, args...)
	t.Logf("rollout %s → exit %d (%s)\n%s%s", strings.Join(args, " "), run.Code, run.Took.Round(time.Millisecond), run.Stdout, run.Stderr)
	return run
}

// plan runs `rollout plan ARGS -o json` and decodes it (no field the type
// does not know); it fails the test unless the exit code is want.
func plan(t *testing.T, want int, args ...string) *v1alpha1.RolloutPlan {
	t.Helper()
	run := cli(t, append(append([]string{"plan"}, args...), "-o", "json")...)
	require.Equal(t, want, run.Code, "stdout: %s\nstderr: %s", run.Stdout, run.Stderr)
	p := &v1alpha1.RolloutPlan{}
	dec := json.NewDecoder(strings.NewReader(run.Stdout))
	dec.DisallowUnknownFields()
	require.NoError(t, dec.Decode(p), run.Stdout)
	return p
}

// kubectl runs bin/kubectl against the sandbox.
func kubectl(t *testing.T, args ...string) string {
	t.Helper()
	cmd := exec.Command(filepath.Join(sb.Env.BinDir, "kubectl"), append([]string{"--kubeconfig", sb.Kubeconfig, "-n", sandbox.DefaultNamespace}, args...)...)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	require.NoError(t, cmd.Run(), "kubectl %s: %s", strings.Join(args, " "), errOut.String())
	return out.String()
}

// machinesOf are the names of the Machines of cluster's control plane
// (cp) or workers (not cp), not being deleted.
func machinesOf(t require.TestingT, cluster string, cp bool) []string {
	list := &clusterv1.MachineList{}
	require.NoError(t, sb.Client.List(context.Background(), list, client.InNamespace(sandbox.DefaultNamespace), client.MatchingLabels{clusterv1.ClusterNameLabel: cluster}))
	var out []string
	for _, m := range list.Items {
		_, isCP := m.Labels[clusterv1.MachineControlPlaneLabel]
		if m.DeletionTimestamp.IsZero() && isCP == cp {
			out = append(out, m.Name)
		}
	}
	sort.Strings(out)
	return out
}

// fleetMachines are, per cluster, its control-plane and worker machines.
type fleetMachines map[string][2][]string

func machinesNow(t *testing.T) fleetMachines {
	out := fleetMachines{}
	for _, c := range clusters {
		out[c.Name] = [2][]string{machinesOf(t, c.Name, true), machinesOf(t, c.Name, false)}
	}
	return out
}

// replacedBy are the machines the plan names as replaced, per cluster:
// control plane, then workers.
func replacedBy(p *v1alpha1.RolloutPlan) fleetMachines {
	out := fleetMachines{}
	for _, c := range clusters {
		out[c.Name] = [2][]string{{}, {}}
	}
	for _, op := range p.Objects {
		for _, m := range op.Machines {
			if m.Action != v1alpha1.ActionReplace {
				continue
			}
			cluster := clusterOfObject(p, op.Object.String())
			part := out[cluster]
			if op.Object.Kind == "KubeadmControlPlane" {
				part[0] = append(part[0], m.Name)
			} else {
				part[1] = append(part[1], m.Name)
			}
			out[cluster] = part
		}
	}
	for k, v := range out {
		sort.Strings(v[0])
		sort.Strings(v[1])
		out[k] = v
	}
	return out
}

func clusterOfObject(p *v1alpha1.RolloutPlan, object string) string {
	for _, cp := range p.Clusters {
		for _, o := range cp.Objects {
			if o == object {
				return cp.Cluster.Name
			}
		}
	}
	return ""
}

// requireReplaced waits until every machine named in want is gone, and
// then checks that exactly those were replaced: the others are still
// there.
func requireReplaced(t *testing.T, before, want fleetMachines) {
	t.Helper()
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		for name, parts := range want {
			for i, part := range parts {
				now := machinesOf(c, name, i == 0)
				for _, m := range part {
					assert.NotContains(c, now, m, "cluster %s: machine %s is to be replaced", name, m)
				}
				assert.Len(c, now, len(before[name][i]), "cluster %s: as many machines as before", name)
			}
		}
	}, rolloutTimeout, pollInterval)
	after := machinesNow(t)
	for name, parts := range before {
		for i, part := range parts {
			var kept []string
			for _, m := range part {
				if !contains(want[name][i], m) {
					kept = append(kept, m)
				}
			}
			for _, m := range kept {
				assert.Contains(t, after[name][i], m, "cluster %s: machine %s the plan left untouched is still there", name, m)
			}
		}
	}
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// apiRequests are the API server's requests so far: all, and dry runs.
func apiRequests(t *testing.T) [2]float64 {
	samples, err := framework.APIServerMetrics(context.Background(), sb.Config)
	require.NoError(t, err)
	all := framework.SumBy(samples, "apiserver_request_total", nil)[""]
	dry := framework.SumBy(samples, "apiserver_request_total", map[string]string{"dry_run": "All"})[""]
	return [2]float64{all, dry}
}

// storedState is what a plan must not change: the resourceVersions of the
// class and the clusters, and how many RolloutRevisions there are.
func storedState(t *testing.T, class string) map[string]string {
	ctx := context.Background()
	out := map[string]string{}
	cc := &clusterv1.ClusterClass{}
	require.NoError(t, sb.Client.Get(ctx, client.ObjectKey{Namespace: sandbox.DefaultNamespace, Name: class}, cc))
	out["clusterclass/"+class] = cc.ResourceVersion
	for _, c := range clusters {
		cl := &clusterv1.Cluster{}
		require.NoError(t, sb.Client.Get(ctx, client.ObjectKey{Namespace: c.Namespace, Name: c.Name}, cl))
		out["cluster/"+c.Name] = cl.ResourceVersion
	}
	revs := &rgv1alpha1.RolloutRevisionList{}
	require.NoError(t, sb.Client.List(ctx, revs))
	out["rolloutrevisions"] = strings.Repeat("x", len(revs.Items))
	return out
}

// specState is what an undo of the class must not change: the class's
// resourceVersion, the clusters' generations (their spec; their status
// moves with the controllers' own work) and the RolloutRevision count.
func specState(t *testing.T, class string) map[string]string {
	out := storedState(t, class)
	for _, c := range clusters {
		cl := &clusterv1.Cluster{}
		require.NoError(t, sb.Client.Get(context.Background(), client.ObjectKey{Namespace: c.Namespace, Name: c.Name}, cl))
		out["cluster/"+c.Name] = strconv.FormatInt(cl.Generation, 10)
	}
	return out
}

// classManifest writes the ClusterClass name, as edited by edit, to a YAML
// file as a user would hand it to kubectl apply.
func classManifest(t *testing.T, name string, edit func(*clusterv1.ClusterClass)) string {
	class := &clusterv1.ClusterClass{}
	require.NoError(t, sb.Client.Get(context.Background(), client.ObjectKey{Namespace: sandbox.DefaultNamespace, Name: name}, class))
	edit(class)
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(class)
	require.NoError(t, err)
	u := &unstructured.Unstructured{Object: m}
	u.SetAPIVersion(clusterv1.GroupVersion.String())
	u.SetKind("ClusterClass")
	u.SetManagedFields(nil)
	u.SetResourceVersion("")
	delete(u.Object, "status")
	raw, err := yaml.Marshal(u.Object)
	require.NoError(t, err)
	path := filepath.Join(t.TempDir(), name+".yaml")
	require.NoError(t, os.WriteFile(path, raw, 0o600))
	return path
}

// TestPlanClassTemplateRotation rotates the worker template of demo-class,
// which all three clusters use: the plan names the three clusters and
// exactly the worker machines then replaced when kubectl applies the edit,
// --fail-on-replace exits 7, and the plan stores nothing.
func TestPlanClassTemplateRotation(t *testing.T) {
	for _, c := range clusters {
		sb.RequireClusterReady(t, c.Namespace, c.Name, rolloutTimeout)
	}
	ctx := context.Background()
	spec := sandbox.DefaultClass(sandbox.DefaultNamespace)
	v2 := spec.WorkerTemplateName() + "-v2"
	// The new worker template: the in-memory backend's start-up taken
	// half as long, a change of the template's spec.
	require.NoError(t, sb.Client.Create(ctx, builder.DevMachineTemplate(sandbox.DefaultNamespace, v2).WithInMemoryBackend(spec.MachineStartup/2).Build()))
	path := classManifest(t, spec.Name, func(c *clusterv1.ClusterClass) {
		c.Spec.Workers.MachineDeployments[0].Infrastructure.TemplateRef.Name = v2
	})
	before := storedState(t, spec.Name)
	machines := machinesNow(t)

	requests0 := apiRequests(t)
	begin := time.Now()
	p := plan(t, 0, "-f", path)
	took := time.Since(begin)
	requests1 := apiRequests(t)
	timings.Add("%-58s %s; API requests in the window %.0f (%.0f dry runs), controllers included", "plan -f of a class edit, 3 clusters", took.Round(100*time.Millisecond), requests1[0]-requests0[0], requests1[1]-requests0[1])
	require.Len(t, p.Clusters, 3, "every cluster of the class")
	for i, cp := range p.Clusters {
		assert.Equal(t, clusters[i].Name, cp.Cluster.Name)
		assert.Equal(t, v1alpha1.PlanClusterChanged, cp.Result, "%+v", cp)
		assert.Equal(t, 0, cp.ControlPlaneReplace, cp.Cluster.Name)
		assert.Equal(t, 1, cp.WorkerReplace, cp.Cluster.Name)
		assert.Len(t, cp.TemplatesRotated, 1, cp.Cluster.Name)
	}
	require.NotNil(t, p.Fleet)
	assert.Equal(t, v1alpha1.FleetTotals{Clusters: 3, Changed: 3, WorkerReplace: 3}, *p.Fleet)
	want := replacedBy(p)
	for _, c := range clusters {
		assert.Equal(t, machines[c.Name][1], want[c.Name][1], "cluster %s: every worker named", c.Name)
		assert.Empty(t, want[c.Name][0], "cluster %s: no control-plane machine named", c.Name)
	}
	run := cli(t, "plan", "-f", path, "--fail-on-replace")
	assert.Equal(t, rollout.ExitWouldReplace, run.Code, run.Stderr)
	assert.Contains(t, run.Stdout, "Fleet: 3 clusters (3 changed, 0 unchanged), 0 control-plane and 3 worker machines replaced.")
	// -l narrows the clusters planned.
	one := plan(t, 0, "-f", path, "-l", clusterv1.ClusterNameLabel+"="+clusters[1].Name)
	require.Len(t, one.Clusters, 1, "-l selects among the class's Clusters by their labels")
	assert.Equal(t, clusters[1].Name, one.Clusters[0].Cluster.Name)
	assert.Equal(t, before, storedState(t, spec.Name), "the plans stored nothing")

	kubectl(t, "apply", "--server-side", "--force-conflicts", "--as", "alice", "--as-group", "system:masters", "-f", path)
	requireReplaced(t, machines, want)
}

// TestPlanVariableAndRebase sets demo-cc-2's workerImage, then rebases
// demo-cc-3 onto a second class: each plan names exactly the machines
// then replaced.
func TestPlanVariableAndRebase(t *testing.T) {
	ctx := context.Background()
	c2, c3 := clusters[1], clusters[2]
	for _, c := range clusters {
		sb.RequireClusterReady(t, c.Namespace, c.Name, rolloutTimeout)
	}

	machines := machinesNow(t)
	p := plan(t, 0, "cluster/"+c2.Name, "--set-variable", sandbox.WorkerImageVariable+`="sandbox-worker:v2"`)
	require.Len(t, p.Clusters, 1)
	assert.Equal(t, v1alpha1.PlanClusterChanged, p.Clusters[0].Result, "%+v", p.Clusters[0])
	want := replacedBy(p)
	assert.Equal(t, machines[c2.Name][1], want[c2.Name][1])
	assert.Empty(t, want[c2.Name][0])
	cluster := &clusterv1.Cluster{}
	require.NoError(t, sb.Client.Get(ctx, client.ObjectKey{Namespace: c2.Namespace, Name: c2.Name}, cluster))
	var vars []clusterv1.ClusterVariable
	for _, v := range cluster.Spec.Topology.Variables {
		if v.Name == sandbox.WorkerImageVariable {
			v.Value.Raw = []byte(`"sandbox-worker:v2"`)
		}
		vars = append(vars, v)
	}
	patch, err := json.Marshal(map[string]any{"spec": map[string]any{"topology": map[string]any{"variables": vars}}})
	require.NoError(t, err)
	kubectl(t, "patch", "cluster", c2.Name, "--type", "merge", "-p", string(patch))
	requireReplaced(t, machines, want)

	// A second class like demo-class whose machines start up at another
	// pace: a rebase rotates both templates.
	other := sandbox.DefaultClass(sandbox.DefaultNamespace)
	other.Name, other.MachineStartup = "demo-class-b", other.MachineStartup*3/4
	require.NoError(t, sb.CreateClass(ctx, other))
	machines = machinesNow(t)
	p = plan(t, 0, "cluster/"+c3.Name, "--class", other.Name)
	require.Len(t, p.Clusters, 1)
	assert.Equal(t, v1alpha1.PlanClusterChanged, p.Clusters[0].Result, "%+v", p.Clusters[0])
	assert.Equal(t, sandbox.DefaultNamespace+"/"+other.Name, p.Clusters[0].Class)
	want = replacedBy(p)
	assert.Equal(t, machines[c3.Name], want[c3.Name], "the rebase rotates the control plane's and the workers' templates")
	kubectl(t, "patch", "cluster", c3.Name, "--type", "merge", "-p", `{"spec":{"topology":{"classRef":{"name":"`+other.Name+`"}}}}`)
	requireReplaced(t, machines, want)
}

// TestPlanEtcdDowngradeThroughAPatch adds to demo-class a variable whose
// patch pins the control plane's etcd image tag: adding it changes no
// cluster; setting it on demo-cc to an etcd minor below the one it runs is
// refused by the guard in the plan (exit 6, EtcdDowngrade), and the
// topology controller's write is then refused alike.
func TestPlanEtcdDowngradeThroughAPatch(t *testing.T) {
	ctx := context.Background()
	c1 := clusters[0]
	sb.RequireClusterReady(t, c1.Namespace, c1.Name, rolloutTimeout)
	const variable = "etcdImageTag"
	path := classManifest(t, sandbox.DefaultClassName, func(c *clusterv1.ClusterClass) {
		c.Spec.Variables = append(c.Spec.Variables, clusterv1.ClusterClassVariable{
			Name: variable, Required: ptr.To(false),
			Schema: clusterv1.VariableSchema{OpenAPIV3Schema: clusterv1.JSONSchemaProps{Type: "string", Description: "etcd's image tag, pinned"}},
		})
		c.Spec.Patches = append(c.Spec.Patches, clusterv1.ClusterClassPatch{
			Name:      "etcd-image-tag",
			EnabledIf: "{{ if ." + variable + " }}true{{ end }}",
			Definitions: []clusterv1.PatchDefinition{{
				Selector: clusterv1.PatchSelector{
					APIVersion: "controlplane.cluster.x-k8s.io/v1beta2", Kind: "KubeadmControlPlaneTemplate",
					MatchResources: clusterv1.PatchSelectorMatch{ControlPlane: ptr.To(true)},
				},
				JSONPatches: []clusterv1.JSONPatch{{
					Op: "add", Path: "/spec/template/spec/kubeadmConfigSpec/clusterConfiguration/etcd",
					ValueFrom: &clusterv1.JSONPatchValue{Template: "local:\n  imageTag: {{ ." + variable + " | quote }}"},
				}},
			}},
		})
	})
	machines := machinesNow(t)
	p := plan(t, 0, "-f", path)
	require.Len(t, p.Clusters, 2, "demo-cc and demo-cc-2: demo-cc-3 is on demo-class-b since its rebase")
	for _, cp := range p.Clusters {
		assert.Equal(t, v1alpha1.PlanClusterUnchanged, cp.Result, "a variable no cluster sets changes none: %+v", cp)
	}
	kubectl(t, "apply", "--server-side", "--force-conflicts", "--as", "bob", "--as-group", "system:masters", "-f", path)
	require.NoError(t, sb.WaitClassReconciled(ctx, sandbox.DefaultNamespace, sandbox.DefaultClassName))

	p = plan(t, rollout.ExitRefused, "cluster/"+c1.Name, "--set-variable", variable+`="3.4.13-0"`)
	require.Len(t, p.Clusters, 1)
	cp := p.Clusters[0]
	assert.Equal(t, v1alpha1.PlanClusterRefused, cp.Result)
	assert.Contains(t, cp.Reason, "[rule EtcdDowngrade]")
	var refused *v1alpha1.ObjectPlan
	for i := range p.Objects {
		if !p.Objects[i].Verdict.Admitted {
			refused = &p.Objects[i]
		}
	}
	require.NotNil(t, refused, "the control plane's write is refused")
	assert.Equal(t, "KubeadmControlPlane", refused.Object.Kind)
	assert.Equal(t, "rollout-guard", refused.Verdict.RefusedBy)
	assert.Contains(t, refused.Verdict.Rules, "EtcdDowngrade")
	// A tag of the minor it runs is admitted.
	_ = plan(t, 0, "cluster/"+c1.Name, "--set-variable", variable+`="3.5.24-0"`)

	// Made: the topology controller's write is refused by the guard, and
	// Cluster API says so in the Cluster's TopologyReconciled condition.
	cluster := &clusterv1.Cluster{}
	require.NoError(t, sb.Client.Get(ctx, client.ObjectKey{Namespace: c1.Namespace, Name: c1.Name}, cluster))
	vars := append(cluster.Spec.Topology.Variables, clusterv1.ClusterVariable{Name: variable})
	vars[len(vars)-1].Value.Raw = []byte(`"3.4.13-0"`)
	patch, err := json.Marshal(map[string]any{"spec": map[string]any{"topology": map[string]any{"variables": vars}}})
	require.NoError(t, err)
	kubectl(t, "patch", "cluster", c1.Name, "--type", "merge", "-p", string(patch))
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		got := &clusterv1.Cluster{}
		require.NoError(c, sb.Client.Get(ctx, client.ObjectKeyFromObject(cluster), got))
		var msg string
		for _, cond := range got.Status.Conditions {
			if cond.Type == clusterv1.ClusterTopologyReconciledCondition {
				msg = cond.Message
			}
		}
		assert.Contains(c, msg, "EtcdDowngrade")
	}, rolloutTimeout, pollInterval)
	assert.Equal(t, machines[c1.Name], machinesNow(t)[c1.Name], "nothing was replaced")
	// rollout status of the class reports that cluster as refused.
	run := cli(t, "status", "clusterclass/"+sandbox.DefaultClassName, "--timeout", rolloutTimeout.String())
	assert.Equal(t, rollout.ExitRefused, run.Code, run.Stderr)
	assert.Contains(t, run.Stdout, "refused (1)\n  "+c1.Name)
	assert.Contains(t, run.Stdout, "EtcdDowngrade")
	// Set back, for whatever runs next.
	require.NoError(t, sb.Client.Get(ctx, client.ObjectKeyFromObject(cluster), cluster))
	vars = nil
	for _, v := range cluster.Spec.Topology.Variables {
		if v.Name != variable {
			vars = append(vars, v)
		}
	}
	patch, err = json.Marshal(map[string]any{"spec": map[string]any{"topology": map[string]any{"variables": vars}}})
	require.NoError(t, err)
	kubectl(t, "patch", "cluster", c1.Name, "--type", "merge", "-p", string(patch))
}

// TestClassHistoryAndUndo reads the history of demo-class after the two
// edits above, alice's template rotation and bob's etcd variable: both
// revisions with their users, alice's with the three clusters it rolled;
// an undo to the first revision previews what it rolls and, with
// --dry-run=server or --emit yaml, changes nothing.
func TestClassHistoryAndUndo(t *testing.T) {
	for _, c := range clusters {
		sb.RequireClusterReady(t, c.Namespace, c.Name, rolloutTimeout)
	}
	run := cli(t, "history", "clusterclass/"+sandbox.DefaultClassName, "-o", "json")
	require.Equal(t, 0, run.Code, run.Stderr)
	h := &v1alpha1.ClusterClassRolloutHistory{}
	require.NoError(t, json.Unmarshal([]byte(run.Stdout), h), run.Stdout)
	byUser := map[string]v1alpha1.ClassHistoryRevision{}
	for _, r := range h.Revisions {
		byUser[r.ChangedBy] = r
	}
	require.Contains(t, byUser, "alice", "%+v", h.Revisions)
	require.Contains(t, byUser, "bob", "%+v", h.Revisions)
	assert.Less(t, byUser["alice"].Revision, byUser["bob"].Revision)
	rolled := map[string]bool{}
	for _, r := range byUser["alice"].Rolled {
		rolled[r.Cluster.Name] = true
	}
	for _, c := range clusters {
		assert.True(t, rolled[c.Name], "alice's rotation rolled %s: %+v", c.Name, byUser["alice"].Rolled)
	}
	first := h.Revisions[0].Revision
	for _, r := range h.Revisions {
		first = min(first, r.Revision)
	}

	before := specState(t, sandbox.DefaultClassName)
	run = cli(t, "undo", "clusterclass/"+sandbox.DefaultClassName, "--to-revision", strconv.FormatInt(first, 10), "--dry-run=server")
	assert.Equal(t, 0, run.Code, run.Stderr)
	assert.Contains(t, run.Stderr, "What the rollback of ClusterClass default/demo-class rolls")
	assert.Contains(t, run.Stderr, "Fleet: 2 clusters", "demo-cc and demo-cc-2 are on the class")
	run = cli(t, "undo", "clusterclass/"+sandbox.DefaultClassName, "--to-revision", strconv.FormatInt(first, 10), "--emit", "yaml")
	assert.Equal(t, 0, run.Code, run.Stderr)
	assert.Contains(t, run.Stdout, "kind: ClusterClass")
	assert.Equal(t, before, specState(t, sandbox.DefaultClassName), "neither stored anything")

	// The topology edit of one Cluster (its workerImage, above) is undone
	// the same way: previewed, and stored nowhere with --dry-run=server.
	run = cli(t, "undo", "cluster/"+clusters[1].Name, "--dry-run=server")
	assert.Equal(t, 0, run.Code, run.Stderr)
	assert.Contains(t, run.Stderr, "What the rollback of the topology of Cluster default/"+clusters[1].Name+" rolls")
	assert.Contains(t, run.Stderr, "changed", "the rollback of workerImage rotates its worker template")
	assert.Equal(t, before, specState(t, sandbox.DefaultClassName), "nothing stored")
}
