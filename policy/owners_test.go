package policy

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	controlplanev1 "sigs.k8s.io/cluster-api/api/controlplane/kubeadm/v1beta2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/rollout-guard/rollout-guard/skew"
)

// controlledBy returns the controller owner reference Cluster API's
// controllers put on what obj makes.
func controlledBy(obj client.Object, kind string) []metav1.OwnerReference {
	gv := clusterv1.GroupVersion
	if kind == "KubeadmControlPlane" {
		gv = controlplanev1.GroupVersion
	}
	return []metav1.OwnerReference{*metav1.NewControllerRef(obj, gv.WithKind(kind))}
}

func withUID[T client.Object](obj T, uid string) T {
	obj.SetUID(types.UID(uid))
	return obj
}

func machineSet(name, version string, owners []metav1.OwnerReference) *clusterv1.MachineSet {
	ms := &clusterv1.MachineSet{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID(name + "-uid"), OwnerReferences: owners}}
	ms.Spec.ClusterName = "c1"
	ms.Spec.Template.Spec.Version = version
	return ms
}

func machine(name, version string, owners []metav1.OwnerReference) *clusterv1.Machine {
	m := &clusterv1.Machine{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, OwnerReferences: owners}}
	m.Spec.ClusterName = "c1"
	m.Spec.Version = version
	return m
}

// TestMachineSetsAndMachinesJudgedWhereTheyDifferFromTheirOwner: a
// MachineSet or Machine made by hand, or naming an owner that is not
// real, is judged as a worker pool (its version against the control
// plane); one with the version of the real owner its controller reference
// names is not judged again, whatever that version (the owner was judged:
// a control plane rolling out, a pool admitted by an override).
func TestMachineSetsAndMachinesJudgedWhereTheyDifferFromTheirOwner(t *testing.T) {
	// The control plane rolls out to v1.36.0: one Machine still runs
	// v1.35.2, so a worker may not be newer than v1.35.
	kcp := withUID(runningKCP("v1.36.0", "v1.35.2", "v1.36.0"), "cp-uid")
	otherKCP := withUID(runningKCP("v1.36.0"), "other-uid")
	otherKCP.Name = "other-cp"
	// A MachineDeployment admitted ahead of it by an override.
	md := withUID(poolMD("md-0", "v1.36.0"), "md-uid")
	mdC2 := withUID(poolMD("md-c2", "v1.36.0"), "md-c2-uid")
	mdC2.Spec.ClusterName = "c2"
	ms := machineSet("md-0-abcde", "v1.36.0", controlledBy(md, "MachineDeployment"))
	mp := withUID(machinePool("mp-0", "v1.36.0"), "mp-uid")
	forged := func(refs []metav1.OwnerReference, uid string) []metav1.OwnerReference {
		refs[0].UID = types.UID(uid)
		return refs
	}
	notController := controlledBy(md, "MachineDeployment")
	notController[0].Controller = nil
	gone := withUID(poolMD("gone", "v1.36.0"), "gone-uid")

	const newer = "v1.36.0 is newer than v1.35.2, the oldest version of control plane KubeadmControlPlane cp (run by one of its machines); a kubelet must not be newer than the API server"
	cases := []struct {
		name string
		obj  client.Object
		want string // the violation's message, "" when allowed
	}{
		{name: "a MachineSet made by hand, ahead", obj: machineSet("ms", "v1.36.0", nil), want: "MachineSet ms: " + newer},
		{name: "a MachineSet made by hand, within skew", obj: machineSet("ms", "v1.35.2", nil)},
		{name: "a MachineSet of its MachineDeployment, at its version", obj: ms},
		{name: "a MachineSet naming its MachineDeployment with another UID", obj: machineSet("ms", "v1.36.0", forged(controlledBy(md, "MachineDeployment"), "forged")), want: "MachineSet ms: " + newer},
		{name: "a MachineSet naming a MachineDeployment that is not there", obj: machineSet("ms", "v1.36.0", controlledBy(gone, "MachineDeployment")), want: "MachineSet ms: " + newer},
		{name: "a MachineSet naming a MachineDeployment of another Cluster", obj: machineSet("ms", "v1.36.0", controlledBy(mdC2, "MachineDeployment")), want: "MachineSet ms: " + newer},
		{name: "a MachineSet naming its MachineDeployment as a mere owner", obj: machineSet("ms", "v1.36.0", notController), want: "MachineSet ms: " + newer},
		{name: "a MachineSet naming a MachinePool", obj: machineSet("ms", "v1.36.0", controlledBy(mp, "MachinePool")), want: "MachineSet ms: " + newer},
		{name: "a MachineSet of its MachineDeployment at another version", obj: machineSet("ms", "v1.36.5", controlledBy(md, "MachineDeployment")),
			want: "MachineSet ms: v1.36.5 is newer than v1.35.2, the oldest version of control plane KubeadmControlPlane cp (run by one of its machines); a kubelet must not be newer than the API server"},
		{name: "a Machine made by hand, ahead", obj: machine("m", "v1.36.0", nil), want: "Machine m: " + newer},
		{name: "a Machine made by hand, within skew", obj: machine("m", "v1.35.2", nil)},
		{name: "a Machine of its MachineSet, at its version", obj: machine("m", "v1.36.0", controlledBy(ms, "MachineSet"))},
		{name: "a Machine of its MachineSet, ahead of it", obj: machine("m", "v1.37.0", controlledBy(machineSet("md-0-abcde", "v1.37.0", nil), "MachineSet")),
			want: "Machine m: v1.37.0 is newer than v1.35.2, the oldest version of control plane KubeadmControlPlane cp (run by one of its machines); a kubelet must not be newer than the API server"},
		{name: "a Machine of its MachinePool, at its version", obj: machine("m", "v1.36.0", controlledBy(mp, "MachinePool"))},
		{name: "a control-plane Machine of the Cluster's control plane, rolling out", obj: machine("cp-x", "v1.36.0", controlledBy(kcp, "KubeadmControlPlane"))},
		{name: "a Machine naming another control plane", obj: machine("m", "v1.36.0", controlledBy(otherKCP, "KubeadmControlPlane")), want: "Machine m: " + newer},
		{name: "a Machine naming the control plane with another UID", obj: machine("m", "v1.36.0", forged(controlledBy(kcp, "KubeadmControlPlane"), "forged")), want: "Machine m: " + newer},
		{name: "a Machine naming a MachineDeployment", obj: machine("m", "v1.36.0", controlledBy(md, "MachineDeployment")), want: "Machine m: " + newer},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := workerWorld(t, true, clusterC1(), kcp, otherKCP, md, mdC2, ms, mp)
			d, _, err := p.Decide(context.Background(), nil, tc.obj)
			require.NoError(t, err)
			if tc.want == "" {
				assert.True(t, d.Allowed(), "refused: %v", violationTexts(d))
				return
			}
			require.Len(t, d.Violations, 1, "violations: %v", violationTexts(d))
			assert.Equal(t, skew.RuleWorkerNewerThanControlPlane, d.Violations[0].Rule)
			assert.Equal(t, tc.want, d.Violations[0].Message)
			wantField := "spec.template.spec.version"
			if _, ok := tc.obj.(*clusterv1.Machine); ok {
				wantField = "spec.version"
			}
			assert.Equal(t, wantField, d.Violations[0].Field)
		})
	}

	t.Run("an update that leaves the version alone is not judged", func(t *testing.T) {
		p := workerWorld(t, true, clusterC1(), kcp)
		m := machine("m", "v1.36.0", nil)
		d, _, err := p.Decide(context.Background(), m, m)
		require.NoError(t, err)
		assert.True(t, d.Allowed())
	})

	t.Run("an owner the cache holds at its version before a bump is read again from the API server", func(t *testing.T) {
		before := withUID(runningKCP("v1.35.2", "v1.35.2"), "cp-uid")
		cached := workerWorld(t, true, clusterC1(), before)
		bumped := withUID(runningKCP("v1.36.0", "v1.35.2"), "cp-uid")
		live := workerWorld(t, true, clusterC1(), bumped)
		m := machine("cp-y", "v1.36.0", controlledBy(bumped, "KubeadmControlPlane"))
		d, _, err := cached.Decide(context.Background(), nil, m)
		require.NoError(t, err)
		assert.False(t, d.Allowed(), "without the API server, judged against the cached control plane")
		cached.Live = live.Reader
		d, _, err = cached.Decide(context.Background(), nil, m)
		require.NoError(t, err)
		assert.True(t, d.Allowed(), "refused: %v", violationTexts(d))
		got := &controlplanev1.KubeadmControlPlane{}
		require.NoError(t, cached.Reader.Get(context.Background(), client.ObjectKeyFromObject(before), got))
		assert.Equal(t, "v1.35.2", got.Spec.Version, "the cached copy is left alone")
	})

	t.Run("an owner the cache does not hold yet is read from the API server", func(t *testing.T) {
		cached := workerWorld(t, true, clusterC1(), kcp)
		live := workerWorld(t, true, clusterC1(), kcp, md, ms)
		cached.Live = live.Reader
		d, _, err := cached.Decide(context.Background(), nil, machine("m", "v1.36.0", controlledBy(ms, "MachineSet")))
		require.NoError(t, err)
		assert.True(t, d.Allowed(), "refused: %v", violationTexts(d))
	})
}

// TestEmptyVersions: a pool, MachineSet or Machine set to run no version
// in a Cluster whose control plane has one is refused with the way out,
// but where it is its owner's (Cluster API copies it), where nothing
// changes, where there is no control plane, and on a create in a paused
// Cluster (clusterctl move), which only warns.
func TestEmptyVersions(t *testing.T) {
	kcp := withUID(runningKCP("v1.35.2", "v1.35.2"), "cp-uid")
	legacy := withUID(poolMD("legacy", ""), "legacy-uid")
	paused := clusterC1()
	paused.Spec.Paused = ptr.To(true)
	noCP := clusterC1()
	noCP.Spec.ControlPlaneRef = clusterv1.ContractVersionedObjectReference{}
	const want = "MachineDeployment md-0: spec.template.spec.version is empty, so its kubelets would run whatever version their machine image holds, checked neither against control plane KubeadmControlPlane cp (spec.version v1.35.2) by rollout-guard nor by Cluster API's MachineSet preflight checks"
	cases := []struct {
		name     string
		cluster  *clusterv1.Cluster
		old, obj client.Object
		want     string
		warning  string
	}{
		{name: "a MachineDeployment created without a version", obj: poolMD("md-0", ""), want: want},
		{name: "a MachineDeployment's version taken away", old: poolMD("md-0", "v1.35.2"), obj: poolMD("md-0", ""), want: want},
		{name: "a MachineDeployment without a version, edited otherwise", old: poolMD("md-0", ""), obj: poolMD("md-0", "")},
		{name: "a MachinePool created without a version", obj: machinePool("mp-0", ""), want: "MachinePool mp-0: spec.template.spec.version is empty"},
		{name: "a Machine made by hand without a version", obj: machine("m", "", nil), want: "Machine m: spec.version is empty"},
		{name: "a MachineSet of a MachineDeployment without a version", obj: machineSet("legacy-x", "", controlledBy(legacy, "MachineDeployment"))},
		{name: "in a Cluster without a control plane", cluster: noCP, obj: poolMD("md-0", "")},
		{name: "created in a paused Cluster", cluster: paused, obj: poolMD("md-0", ""), warning: "created in paused Cluster ns/c1, as `clusterctl move` creates it"},
		{name: "taken away in a paused Cluster", cluster: paused, old: poolMD("md-0", "v1.35.2"), obj: poolMD("md-0", ""), want: want},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cluster := tc.cluster
			if cluster == nil {
				cluster = clusterC1()
			}
			p := workerWorld(t, true, cluster, kcp, legacy)
			d, _, err := p.Decide(context.Background(), tc.old, tc.obj)
			require.NoError(t, err)
			if tc.want == "" {
				assert.True(t, d.Allowed(), "refused: %v", violationTexts(d))
				if tc.warning != "" {
					require.Len(t, d.Warnings, 1)
					assert.Contains(t, d.Warnings[0], "[rule WorkerVersionUnset]")
					assert.Contains(t, d.Warnings[0], tc.warning)
				}
				return
			}
			require.Len(t, d.Violations, 1, "violations: %v", violationTexts(d))
			assert.Equal(t, skew.RuleWorkerVersionUnset, d.Violations[0].Rule)
			assert.Contains(t, d.Violations[0].Message, tc.want)
			assert.Contains(t, d.Violations[0].Remedy, "to the version the machines run, within the kubelet skew of v1.35.2")
			assert.Contains(t, d.Violations[0].Remedy, "rollout-guard.io/override")
		})
	}
}

// TestPreflightSkewChecksSkipped: the annotation that skips Cluster API's
// MachineSet preflight checks is refused where it newly skips a skew
// check, on a MachineDeployment or a MachineSet of its own, and allowed
// where it skips none, where it was set before, where a MachineSet has it
// from its MachineDeployment, and (with a warning) on a create in a paused
// Cluster.
func TestPreflightSkewChecksSkipped(t *testing.T) {
	kcp := withUID(runningKCP("v1.35.2", "v1.35.2"), "cp-uid")
	annotated := func(obj client.Object, value string) client.Object {
		if value != "" {
			obj.SetAnnotations(map[string]string{clusterv1.MachineSetSkipPreflightChecksAnnotation: value})
		}
		return obj
	}
	md := annotated(withUID(poolMD("md-0", "v1.35.2"), "md-uid"), "All")
	paused := clusterC1()
	paused.Spec.Paused = ptr.To(true)
	cases := []struct {
		name     string
		cluster  *clusterv1.Cluster
		old, obj client.Object
		want     string
	}{
		{name: "a MachineDeployment created skipping all checks", obj: annotated(poolMD("md-1", "v1.35.2"), "All"),
			want: `MachineDeployment md-1: annotation machineset.cluster.x-k8s.io/skip-preflight-checks="All" skips Cluster API's preflight check(s) KubernetesVersionSkew, KubeadmVersionSkew, ControlPlaneVersionSkew`},
		{name: "a MachineDeployment set to skip the Kubernetes skew check", old: poolMD("md-1", "v1.35.2"), obj: annotated(poolMD("md-1", "v1.35.2"), "ControlPlaneIsStable, KubernetesVersionSkew"),
			want: "skips Cluster API's preflight check(s) KubernetesVersionSkew,"},
		{name: "a MachineDeployment set to skip one more skew check", old: annotated(poolMD("md-1", "v1.35.2"), "KubernetesVersionSkew"), obj: annotated(poolMD("md-1", "v1.35.2"), "KubernetesVersionSkew,KubeadmVersionSkew"),
			want: "skips Cluster API's preflight check(s) KubeadmVersionSkew,"},
		{name: "a MachineDeployment set to skip the stability check only", obj: annotated(poolMD("md-1", "v1.35.2"), "ControlPlaneIsStable")},
		{name: "a MachineDeployment that skipped them before", old: annotated(poolMD("md-1", "v1.35.2"), "All"), obj: annotated(poolMD("md-1", "v1.35.2"), "All")},
		{name: "a MachineDeployment that stops skipping", old: annotated(poolMD("md-1", "v1.35.2"), "All"), obj: poolMD("md-1", "v1.35.2")},
		{name: "a MachineSet made by hand skipping them", obj: annotated(machineSet("ms", "v1.35.2", nil), "KubeadmVersionSkew"), want: "MachineSet ms: annotation"},
		{name: "a MachineSet with its MachineDeployment's annotation", obj: annotated(machineSet("md-0-abcde", "v1.35.2", controlledBy(md, "MachineDeployment")), "All")},
		{name: "a MachineSet skipping what its MachineDeployment does not", obj: annotated(machineSet("md-0-abcde", "v1.35.2", controlledBy(md, "MachineDeployment")), "KubernetesVersionSkew"), want: "MachineSet md-0-abcde: annotation"},
		{name: "a Machine's annotation is not Cluster API's to read", obj: annotated(machine("m", "v1.35.2", nil), "All")},
		{name: "created in a paused Cluster", cluster: paused, obj: annotated(poolMD("md-1", "v1.35.2"), "All")},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cluster := tc.cluster
			if cluster == nil {
				cluster = clusterC1()
			}
			p := workerWorld(t, true, cluster, kcp, md)
			var old client.Object
			if tc.old != nil {
				old = tc.old
			}
			d, _, err := p.Decide(context.Background(), old, tc.obj)
			require.NoError(t, err)
			if tc.want == "" {
				assert.True(t, d.Allowed(), "refused: %v", violationTexts(d))
				if tc.cluster == paused {
					require.Len(t, d.Warnings, 1)
					assert.Contains(t, d.Warnings[0], "[rule PreflightSkewChecksSkipped]")
				}
				return
			}
			require.Len(t, d.Violations, 1, "violations: %v", violationTexts(d))
			v := d.Violations[0]
			assert.Equal(t, skew.RulePreflightSkewChecksSkipped, v.Rule)
			assert.Equal(t, "metadata.annotations", v.Field)
			assert.Contains(t, v.Message, tc.want)
			assert.Contains(t, v.Remedy, "rollout-guard.io/override")
		})
	}
}
