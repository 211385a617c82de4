package skew

// The facts of a change as text, every version a string as objects write
// it, and how they are read into the Parsed forms the rules take: each
// version parsed once, by ReadVersion or ReadEtcdVersion. Package policy
// reads objects straight into the Parsed forms; these serve callers that
// hold versions as text.

// History is what a control plane is known to have run: from its running
// machines, its previous spec and recorded revisions.
type History struct {
	// HighestKubernetes is the highest Kubernetes version ever run, "" if unknown.
	HighestKubernetes string
	// HighestKubernetesSource is what it came from, e.g. "revision 4" or
	// "the current spec".
	HighestKubernetesSource string
	// HighestEtcd is the highest etcd version ever run (an image tag or a
	// version), "" if unknown.
	HighestEtcd string
	// HighestEtcdSource is what HighestEtcd came from, e.g. "revision 4".
	HighestEtcdSource string
}

// Worker is one worker that runs a kubelet against the control plane: a pool
// (MachineDeployment, MachinePool) or a Machine.
type Worker struct {
	// Kind is "MachineDeployment", "MachinePool" or "Machine".
	Kind string
	// Name is the object's name.
	Name string
	// Version is the pool's spec version or the machine's kubelet version;
	// "" means unknown: the worker is skipped with no warning.
	Version string
	// PoolKind and PoolName name the pool a Machine belongs to
	// ("MachineDeployment" or "MachinePool"); both "" when it belongs to
	// none or its pool is not known. A pool leaves them empty. Refusals
	// name a pool's Machines together with it, in one line per rule.
	PoolKind, PoolName string
}

// ControlPlaneChange is the facts of one change to a control plane's version
// or etcd: a KubeadmControlPlane update, or a Cluster topology version change.
type ControlPlaneChange struct {
	// Kind and Name name the changed object in messages
	// ("KubeadmControlPlane", "Cluster").
	Kind, Name string
	// VersionField is the field path of the version: "spec.version"
	// (KubeadmControlPlane, the default) or "spec.topology.version" (Cluster).
	VersionField string
	// EtcdField is the field path of the etcd image tag, for messages;
	// default "spec.kubeadmConfigSpec.clusterConfiguration.etcd.local.imageTag".
	EtcdField string
	// OldVersion is the version before the change ("" on create).
	OldVersion string
	// NewVersion is the version after the change.
	NewVersion string
	// OldEtcdImageTag is the explicit etcd image tag before the change, ""
	// when kubeadm's default applies.
	OldEtcdImageTag string
	// NewEtcdImageTag is the explicit etcd image tag after the change, ""
	// when kubeadm's default applies.
	NewEtcdImageTag string
	// RunningVersions are the versions the control-plane machines run now
	// (KubeadmControlPlane status.versions[].version, status.version); may be empty.
	RunningVersions []string
	// History is what the control plane is known to have run before.
	History History
	// Workers are the workers whose kubelets talk to this control plane.
	Workers []Worker
	// Plan, when set, is how Cluster API carries out this change of a
	// topology version: the versions the control plane goes through (a
	// chained upgrade), or the upgrade-plan extension that will decide them.
	// nil: the control plane goes straight to NewVersion.
	Plan *UpgradePlan
	// NoEtcd says the control plane runs no etcd the policy knows (a
	// control plane other than kubeadm's, read through Cluster API's
	// contract): rule EtcdDowngrade does not apply.
	NoEtcd bool
	// PreviousUnrolled says the previous spec (OldVersion, OldEtcdImageTag)
	// was never rolled out: no control-plane machine was created with it or
	// runs it. It then does not count as run, so going back from it is a
	// revert judged against RunningVersions and History only; History must
	// then leave out the revision being reverted.
	PreviousUnrolled bool
}

// UpgradePlan is how Cluster API's topology controller carries out one change
// of spec.topology.version (a chained upgrade, Cluster API v1.12 and later).
type UpgradePlan struct {
	// Source names where the steps come from, for messages, e.g.
	// "ClusterClass demo-class spec.kubernetesVersions".
	Source string
	// Steps are the versions the control plane goes through, in order; the
	// last is the new version. Empty when Extension decides them.
	Steps []string
	// Extension names the upgrade-plan extension (ClusterClass
	// spec.upgrade.external.generateUpgradePlanExtension) that computes the
	// steps when the upgrade starts; only the target can be judged here.
	Extension string
}

// Parse reads h's versions.
func (h History) Parse() ParsedHistory {
	return ParsedHistory{
		HighestKubernetes:       ReadVersion(h.HighestKubernetes),
		HighestKubernetesSource: h.HighestKubernetesSource,
		HighestEtcd:             ReadEtcdVersion(h.HighestEtcd),
		HighestEtcdSource:       h.HighestEtcdSource,
	}
}

// Parse reads w's version.
func (w Worker) Parse() ParsedWorker {
	return ParsedWorker{Kind: w.Kind, Name: w.Name, Version: ReadVersion(w.Version), PoolKind: w.PoolKind, PoolName: w.PoolName}
}

// Parse reads the plan's steps; nil gives nil.
func (p *UpgradePlan) Parse() *ParsedUpgradePlan {
	if p == nil {
		return nil
	}
	return &ParsedUpgradePlan{Source: p.Source, Steps: ReadVersions(p.Steps), Extension: p.Extension}
}

// Parse reads every version of c.
func (c ControlPlaneChange) Parse() ParsedControlPlaneChange {
	p := ParsedControlPlaneChange{
		Kind:             c.Kind,
		Name:             c.Name,
		VersionField:     c.VersionField,
		EtcdField:        c.EtcdField,
		OldVersion:       ReadVersion(c.OldVersion),
		NewVersion:       ReadVersion(c.NewVersion),
		OldEtcdImageTag:  ReadEtcdVersion(c.OldEtcdImageTag),
		NewEtcdImageTag:  ReadEtcdVersion(c.NewEtcdImageTag),
		RunningVersions:  ReadVersions(c.RunningVersions),
		History:          c.History.Parse(),
		Plan:             c.Plan.Parse(),
		NoEtcd:           c.NoEtcd,
		PreviousUnrolled: c.PreviousUnrolled,
	}
	if c.Workers != nil {
		p.Workers = make([]ParsedWorker, len(c.Workers))
		for i, w := range c.Workers {
			p.Workers[i] = w.Parse()
		}
	}
	return p
}

// EvaluateControlPlane is EvaluateParsedControlPlane of c, its versions
// read once.
func EvaluateControlPlane(c ControlPlaneChange) Decision {
	return EvaluateParsedControlPlane(c.Parse())
}

// ControlPlaneState is what a worker change is judged against. Any control
// plane that follows Cluster API's contract (spec.version, status.version)
// fits, not only KubeadmControlPlane.
type ControlPlaneState struct {
	// Kind and Name name the control plane in messages.
	Kind, Name string
	// Version is the control plane's spec.version.
	Version string
	// RunningVersions are its status.versions / status.version. The lowest of
	// these and Version bounds workers from above (no kubelet newer than the
	// oldest API server); the highest bounds them from below (the kubelet
	// skew counts from the newest API server). May be empty.
	RunningVersions []string
}

// WorkerChange is the facts of one change (or create) of a worker pool's version.
type WorkerChange struct {
	// Kind and Name name the pool in messages ("MachineDeployment").
	Kind, Name string
	// VersionField is the field path of the version; default
	// "spec.template.spec.version".
	VersionField string
	// OldVersion is the version before the change, "" on create.
	OldVersion string
	// NewVersion is the version after the change.
	NewVersion string
	// ControlPlane is the cluster's control plane; nil when unknown, which
	// gives a warning and no violation.
	ControlPlane *ControlPlaneState
}

// Parse reads the control plane's versions; nil gives nil.
func (s *ControlPlaneState) Parse() *ParsedControlPlaneState {
	if s == nil {
		return nil
	}
	return &ParsedControlPlaneState{Kind: s.Kind, Name: s.Name, Version: ReadVersion(s.Version), RunningVersions: ReadVersions(s.RunningVersions)}
}

// Parse reads every version of c.
func (c WorkerChange) Parse() ParsedWorkerChange {
	return ParsedWorkerChange{
		Kind:         c.Kind,
		Name:         c.Name,
		VersionField: c.VersionField,
		OldVersion:   ReadVersion(c.OldVersion),
		NewVersion:   ReadVersion(c.NewVersion),
		ControlPlane: c.ControlPlane.Parse(),
	}
}

// EvaluateWorker is EvaluateParsedWorker of c, its versions read once.
func EvaluateWorker(c WorkerChange) Decision {
	return EvaluateParsedWorker(c.Parse())
}
