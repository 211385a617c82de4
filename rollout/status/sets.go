package status

import (
	"sort"
	"strconv"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
)

// MachineSetStatus is what `rollout status` shows of one MachineSet of a
// MachineDeployment.
type MachineSetStatus struct {
	// Name is the MachineSet's name.
	Name string
	// Revision is Cluster API's revision annotation of the MachineSet.
	Revision string
	// New reports that this is the MachineDeployment's current MachineSet:
	// its revision is the one the MachineDeployment controller surfaced on
	// the MachineDeployment.
	New bool
	// Replicas is spec.replicas; Current, UpToDate, Ready and Available
	// are the status counts.
	Replicas, Current, UpToDate, Ready, Available int32
	// Observed reports the MachineSet controller observed its generation.
	Observed bool
}

// machineSetFacts are the structural facts of a MachineDeployment's rollout
// that do not depend on any Machine condition: which MachineSet is the
// current one, and whether every other one is empty.
type machineSetFacts struct {
	// sets are the MachineSets, the current one first, then by revision
	// (newest first) and name.
	sets []MachineSetStatus
	// newName is the current MachineSet's name; "" when it is not known
	// (not created yet, or not seen yet).
	newName string
	// settled: the current MachineSet wants and has spec.replicas of the
	// MachineDeployment, all up to date and available, its controller
	// observed its spec, and every other MachineSet wants and has none.
	settled bool
}

// evaluateMachineSets derives the facts from a MachineDeployment's
// revision annotation (want), its spec.replicas (desired) and its
// MachineSets. The current MachineSet is the one whose revision annotation
// equals the one the MachineDeployment controller copies on the
// MachineDeployment in the reconcile that observes its generation (so the
// pair cannot be stale against each other); without that annotation, the
// only MachineSet that wants replicas.
func evaluateMachineSets(want string, desired int32, list []clusterv1.MachineSet) machineSetFacts {
	f := machineSetFacts{}
	for i := range list {
		ms := &list[i]
		st := MachineSetStatus{
			Name:      ms.Name,
			Revision:  ms.Annotations[clusterv1.RevisionAnnotation],
			Replicas:  ptr.Deref(ms.Spec.Replicas, 0),
			Current:   ptr.Deref(ms.Status.Replicas, 0),
			UpToDate:  ptr.Deref(ms.Status.UpToDateReplicas, 0),
			Ready:     ptr.Deref(ms.Status.ReadyReplicas, 0),
			Available: ptr.Deref(ms.Status.AvailableReplicas, 0),
			Observed:  ms.Status.ObservedGeneration >= ms.Generation,
		}
		st.New = want != "" && st.Revision == want && ms.DeletionTimestamp.IsZero()
		f.sets = append(f.sets, st)
	}
	if want == "" {
		var wanting []int
		for i, st := range f.sets {
			if st.Replicas > 0 {
				wanting = append(wanting, i)
			}
		}
		if len(wanting) == 1 {
			f.sets[wanting[0]].New = true
		}
	}
	sort.SliceStable(f.sets, func(i, j int) bool {
		a, b := f.sets[i], f.sets[j]
		if a.New != b.New {
			return a.New
		}
		ra, _ := strconv.Atoi(a.Revision)
		rb, _ := strconv.Atoi(b.Revision)
		if ra != rb {
			return ra > rb
		}
		return a.Name < b.Name
	})
	f.settled = true
	for _, st := range f.sets {
		if st.New {
			f.newName = st.Name
			if !st.Observed || st.Replicas != desired || st.Current != desired || st.UpToDate != desired || st.Available != desired {
				f.settled = false
			}
			continue
		}
		if st.Replicas != 0 || st.Current != 0 {
			f.settled = false
		}
	}
	if f.newName == "" {
		f.settled = false
	}
	return f
}

// ownerMachineSet is the name of the MachineSet that controls m, or "".
func ownerMachineSet(m *clusterv1.Machine) string {
	if ref := metav1.GetControllerOfNoCopy(m); ref != nil && ref.Kind == "MachineSet" {
		return ref.Name
	}
	return ""
}
