package stage

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/cli-runtime/pkg/printers"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	"github.com/rollout-guard/rollout-guard/rollout/api/v1alpha1"
	"github.com/rollout-guard/rollout-guard/rollout/internal/core"
	"github.com/rollout-guard/rollout-guard/rollout/plan"
	"github.com/rollout-guard/rollout-guard/rollout/status"
)

// ExitHalted: a cluster stalled, was refused, was remediated or paused, or
// went away during its wave or its soak; later waves were not touched.
// The same exit code as status's stall.
const ExitHalted = status.ExitStalled

// Options are a staged rollout's: which clusters, to what, in which
// waves, and how a wave is judged.
type Options struct {
	// Session is the invocation: its clients, streams and checks.
	Session *core.Session
	// Targets are the clusters named (cluster/NAME ...), or the kind
	// alone with Selector or AllNamespaces.
	Targets core.Targets
	// Selector is -l; AllNamespaces is -A.
	Selector      string
	AllNamespaces bool
	// Version is --version (spec.topology.version); Class is --class
	// (spec.topology.classRef, NAME or NAMESPACE/NAME). One of the two.
	Version, Class string
	// Waves is --waves; MaxConcurrent is --max-concurrent (0: a whole
	// wave at once); Soak is --soak; Order is --order (a label).
	Waves         string
	MaxConcurrent int
	Soak          time.Duration
	Order         string
	// Grace and ProgressDeadline judge each cluster as status does.
	Grace, ProgressDeadline time.Duration
	// DryRun is --dry-run; Emit is --emit; Force is --force.
	DryRun core.DryRun
	Emit   core.EmitFormat
	Force  bool
	// Cause is the change-cause recorded with each edit.
	Cause string
	// Poll is how long a wait lasts without a change before it looks
	// again (the soak's end, a stall's deadline). Default one second.
	Poll time.Duration
}

// member is one cluster of the rollout.
type member struct {
	cluster *clusterv1.Cluster
	key     string
	wave    int
	// atTarget reports that its topology is at the target already
	// (edited before: a resumed rollout waits for it, never edits it).
	atTarget bool
	plan     v1alpha1.ClusterPlan
}

// Run carries the rollout out: the clusters read and planned, every
// change checked, then wave by wave edited and watched.
func (o *Options) Run(ctx context.Context) error {
	if (o.Version == "") == (o.Class == "") {
		return fmt.Errorf("a rollout of clusters takes --version V or --class NAME, not both: roll out one, then the other")
	}
	if o.MaxConcurrent < 0 {
		return fmt.Errorf("--max-concurrent %d: give the number of clusters of a wave changed at once (0: the whole wave)", o.MaxConcurrent)
	}
	if o.Soak < 0 {
		return fmt.Errorf("--soak %s: give how long a finished wave must stay healthy (e.g. 10m), or 0", o.Soak)
	}
	if o.Poll <= 0 {
		o.Poll = time.Second
	}
	spec, err := ParseWaves(o.Waves)
	if err != nil {
		return err
	}
	cl, err := o.Session.Clients()
	if err != nil {
		return err
	}
	members, waves, err := o.read(ctx, cl, spec)
	if err != nil {
		return err
	}
	if err := o.preview(members, waves, spec); err != nil {
		return err
	}
	switch {
	case o.Emit != core.EmitNone:
		return o.emit(waves)
	case o.DryRun == core.DryRunClient:
		o.Session.Notef("dry run: nothing was sent")
		return nil
	case o.DryRun == core.DryRunServer:
		return o.dryRunServer(ctx, cl, waves)
	}
	for _, m := range members {
		if !m.atTarget {
			if err := o.Session.CheckGitOps(ctx, cl, "roll out", m.cluster, o.Force, o.inGit()); err != nil {
				return err
			}
		}
	}
	return o.roll(ctx, cl, members, waves)
}

// target is the change in words: "v1.35.2", "ClusterClass gold".
func (o *Options) target() string {
	if o.Version != "" {
		return o.Version
	}
	return "ClusterClass " + o.Class
}

// atTarget reports whether the cluster's topology is at the target.
func (o *Options) atTarget(c *clusterv1.Cluster) bool {
	if o.Version != "" {
		return c.Spec.Topology.Version == o.Version
	}
	ns, name, ok := strings.Cut(o.Class, "/")
	if !ok {
		ns, name = c.Namespace, o.Class
	}
	key := c.GetClassKey()
	return key.Name == name && key.Namespace == ns
}

// patch is the Cluster's edit: its topology's version or class, with the
// change-cause, preconditioned on the resourceVersion read.
func (o *Options) patch(c *clusterv1.Cluster) ([]byte, error) {
	topology := map[string]any{}
	if o.Version != "" {
		topology["version"] = o.Version
	}
	if o.Class != "" {
		ref := map[string]any{"name": o.Class}
		if ns, name, ok := strings.Cut(o.Class, "/"); ok {
			ref = map[string]any{"namespace": ns, "name": name}
		}
		topology["classRef"] = ref
	}
	return core.PatchOf(c.ResourceVersion, core.CauseAnnotations(o.Cause), map[string]any{"topology": topology})
}

// read lists the clusters, refuses those without a topology, orders them,
// cuts them into waves and plans each one's change.
func (o *Options) read(ctx context.Context, cl *core.Clients, spec WaveSpec) ([]*member, [][]*member, error) {
	objs, err := o.Session.Resolve(ctx, cl, o.Targets, o.Selector, o.AllNamespaces, "roll out")
	if err != nil {
		return nil, nil, err
	}
	if len(objs) == 0 {
		where := "namespace " + cl.Namespace
		if o.AllNamespaces {
			where = "any namespace"
		}
		return nil, nil, fmt.Errorf("no Cluster in %s matches -l %s: nothing to roll out; check -n and -l, or look in every namespace with -A", where, o.Selector)
	}
	var clusters []*clusterv1.Cluster
	var noTopology []string
	for _, obj := range objs {
		c := obj.(*clusterv1.Cluster)
		if !c.Spec.Topology.IsDefined() {
			noTopology = append(noTopology, c.Namespace+"/"+c.Name)
			continue
		}
		clusters = append(clusters, c)
	}
	if len(noTopology) > 0 {
		return nil, nil, fmt.Errorf("cannot roll out %s: %s %s no spec.topology (%s), so there is no version or class of the Cluster to change; nothing was changed: leave %s out with -l, and roll %s control planes and worker pools one by one (%s kcp/NAME --version %s)",
			o.target(), strings.Join(noTopology, ", "), core.Plural(len(noTopology), "has", "have"), core.Plural(len(noTopology), "not a ClusterClass cluster", "not ClusterClass clusters"),
			core.Plural(len(noTopology), "it", "them"), core.Plural(len(noTopology), "its", "their"), o.Session.Name(), orText(o.Version, "V"))
	}
	Order(clusters, o.Order)
	idx, err := spec.Split(len(clusters))
	if err != nil {
		return nil, nil, err
	}
	members := make([]*member, 0, len(clusters))
	waves := make([][]*member, len(idx))
	for wi, w := range idx {
		for _, i := range w {
			c := clusters[i]
			m := &member{cluster: c, key: c.Namespace + "/" + c.Name, wave: wi, atTarget: o.atTarget(c)}
			if !m.atTarget {
				if m.plan, err = plan.ClusterSwitch(ctx, o.Session, cl, c, o.Version, o.Class); err != nil {
					return nil, nil, fmt.Errorf("cannot plan cluster %s: %w; nothing was changed", m.key, err)
				}
			}
			members, waves[wi] = append(members, m), append(waves[wi], m)
		}
	}
	return members, waves, nil
}

func orText(s, otherwise string) string {
	if s == "" {
		return otherwise
	}
	return s
}

// preview prints the waves and each one's plan, and stops the rollout
// before its first edit when a cluster's change would be refused or could
// not be computed.
func (o *Options) preview(members []*member, waves [][]*member, spec WaveSpec) error {
	out := o.Session.IOStreams.Out
	at := "the whole wave at once"
	if o.MaxConcurrent > 0 {
		at = fmt.Sprintf("at most %d %s of a wave at once", o.MaxConcurrent, core.Plural(o.MaxConcurrent, "cluster", "clusters"))
	}
	fmt.Fprintf(out, "Staged rollout of %d %s to %s in %d %s (--waves %s; %s; soak %s):\n", len(members), core.Plural(len(members), "cluster", "clusters"), o.target(),
		len(waves), core.Plural(len(waves), "wave", "waves"), spec, at, o.Soak)
	var refused, notComputed []string
	tw := printers.GetNewTabWriter(out)
	for wi, w := range waves {
		var cps []v1alpha1.ClusterPlan
		for _, m := range w {
			if !m.atTarget {
				cps = append(cps, m.plan)
			}
		}
		t := plan.FleetTotalsOf(cps)
		if t == nil {
			t = &v1alpha1.FleetTotals{}
		}
		fmt.Fprintf(tw, "Wave %d of %d: %d %s, %d to change: %d control-plane and %d worker %s replaced\n", wi+1, len(waves), len(w), core.Plural(len(w), "cluster", "clusters"),
			t.Changed+t.Refused+t.NotComputed, t.ControlPlaneReplace, t.WorkerReplace, core.Plural(t.WorkerReplace, "machine", "machines"))
		for _, m := range w {
			fmt.Fprintf(tw, "  %s\t%s\n", m.key, memberLine(m, o.target()))
			switch m.plan.Result {
			case v1alpha1.PlanClusterRefused:
				refused = append(refused, m.key)
			case v1alpha1.PlanClusterNotComputed:
				notComputed = append(notComputed, m.key)
			}
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	switch {
	case len(refused) > 0:
		return core.StatusError{Code: core.ExitRefused, Msg: fmt.Sprintf("%d of %d clusters would be refused (%s): nothing was changed; the plan above says why: change the target, or leave them out with -l", len(refused), len(members), strings.Join(refused, ", "))}
	case len(notComputed) > 0:
		return fmt.Errorf("the change of %s could not be computed (above): nothing was changed", strings.Join(notComputed, ", "))
	}
	return nil
}

// memberLine is a cluster's line of the preview.
func memberLine(m *member, target string) string {
	if m.atTarget {
		return "at " + target + " already: waited for, not edited again"
	}
	p := m.plan
	s := fmt.Sprintf("%s: %d control-plane and %d worker %s replaced", p.Result, p.ControlPlaneReplace, p.WorkerReplace, core.Plural(p.WorkerReplace, "machine", "machines"))
	if p.Reason != "" {
		s += ": " + p.Reason
	}
	return s
}

// emit prints, wave by wave, the Clusters as they would be after the
// change, for Git.
func (o *Options) emit(waves [][]*member) error {
	out := o.Session.IOStreams.Out
	for wi, w := range waves {
		if wi == 0 {
			fmt.Fprintf(out, "# Wave %d of %d: commit these first\n", wi+1, len(waves))
		} else {
			fmt.Fprintf(out, "# Wave %d of %d: commit these once wave %d is rolled out and has soaked (rollout status cluster -l ...)\n", wi+1, len(waves), wi)
		}
		for _, m := range w {
			if m.atTarget {
				fmt.Fprintf(out, "# %s is at %s already\n", m.key, o.target())
				continue
			}
			p, err := o.patch(m.cluster)
			if err != nil {
				return fmt.Errorf("cannot print the change of cluster %s: %w", m.key, err)
			}
			changed, err := core.ApplyMergePatch(m.cluster, p)
			if err != nil {
				return fmt.Errorf("cannot print the change of cluster %s: %w", m.key, err)
			}
			if err := core.Emit(out, o.Emit, m.cluster, changed, p); err != nil {
				return err
			}
		}
	}
	return nil
}

// inGit is the command that prints the rollout for Git.
func (o *Options) inGit() string {
	words := []string{o.Session.Name(), "cluster"}
	if o.Selector != "" {
		words = append(words, "-l", core.Quote(o.Selector))
	}
	if o.AllNamespaces {
		words = append(words, "-A")
	}
	if o.Version != "" {
		words = append(words, "--version", core.Quote(o.Version))
	}
	if o.Class != "" {
		words = append(words, "--class", core.Quote(o.Class))
	}
	return strings.Join(append(words, "--waves", core.Quote(o.Waves), "--emit", "yaml"), " ")
}

// dryRunServer sends every edit as a server-side dry run, wave by wave:
// the guard and Cluster API's webhooks answer, nothing is changed.
func (o *Options) dryRunServer(ctx context.Context, cl *core.Clients, waves [][]*member) error {
	out := o.Session.IOStreams.Out
	for wi, w := range waves {
		for _, m := range w {
			if m.atTarget {
				continue
			}
			err, exhausted := o.send(ctx, cl, m, core.DryRunServer)
			if exhausted {
				return fmt.Errorf("cannot roll out cluster %s (server dry run): it kept changing (%d conflicts): %w", m.key, core.MaxAttempts, err)
			}
			if err != nil {
				return err
			}
			fmt.Fprintf(out, "wave %d: cluster %s: rolling out to %s (server dry run)\n", wi+1, m.key, o.target())
		}
	}
	return nil
}

// halt is the error of a halted rollout: who halted it, what was changed,
// what was not touched.
func (o *Options) halt(members []*member, waves [][]*member, wi int, who, why string) error {
	var changed, untouched []string
	for _, m := range members {
		switch {
		case m.atTarget:
			changed = append(changed, m.key)
		case m.wave > wi:
			untouched = append(untouched, m.key)
		}
	}
	msg := fmt.Sprintf("the rollout to %s halted in wave %d of %d: cluster %s %s", o.target(), wi+1, len(waves), who, why)
	msg += "; clusters at " + o.target() + ", left as they are: " + listOr(changed, "none")
	msg += "; later waves not touched: " + listOr(untouched, "none")
	msg += "; once it is fixed, run the same command again: it goes on where it stopped and edits no cluster twice"
	return core.StatusError{Code: ExitHalted, Msg: msg}
}

func listOr(items []string, none string) string {
	if len(items) == 0 {
		return none
	}
	return strings.Join(items, ", ")
}

// roll edits and watches the clusters, wave by wave.
func (o *Options) roll(ctx context.Context, cl *core.Clients, members []*member, waves [][]*member) error {
	ns := cl.Namespace
	if o.AllNamespaces {
		ns = ""
	}
	sel := labels.Everything()
	if o.Selector != "" {
		var err error
		if sel, err = labels.Parse(o.Selector); err != nil {
			return fmt.Errorf("-l %q: %w", o.Selector, err)
		}
	}
	watchCtx, stop := context.WithCancel(ctx)
	defer stop()
	obs, err := status.NewObserver(watchCtx, cl, ns, sel, o.Grace, o.ProgressDeadline, o.Session.IOStreams.ErrOut)
	if err != nil {
		return err
	}
	obs.Start(watchCtx)
	out := o.Session.IOStreams.Out
	for wi, w := range waves {
		fmt.Fprintf(out, "%s wave %d of %d: %s\n", o.clock(), wi+1, len(waves), keysOf(w))
		if err := o.rollWave(ctx, cl, obs, members, waves, wi); err != nil {
			return err
		}
		if o.Soak > 0 && wi < len(waves)-1 {
			fmt.Fprintf(out, "%s wave %d of %d rolled out: soaking for %s before wave %d\n", o.clock(), wi+1, len(waves), o.Soak, wi+2)
			if err := o.soak(ctx, obs, members, waves, wi); err != nil {
				return err
			}
		}
		fmt.Fprintf(out, "%s wave %d of %d done\n", o.clock(), wi+1, len(waves))
	}
	fmt.Fprintf(out, "%d %s rolled out to %s in %d %s\n", len(members), core.Plural(len(members), "cluster", "clusters"), o.target(), len(waves), core.Plural(len(waves), "wave", "waves"))
	return nil
}

func (o *Options) clock() string { return o.Session.Now().UTC().Format("15:04:05") }

func keysOf(ms []*member) string {
	keys := make([]string, len(ms))
	for i, m := range ms {
		keys[i] = m.key
	}
	return strings.Join(keys, ", ")
}

// rollWave edits the wave's clusters (at most MaxConcurrent rolling at
// once) and waits until each is rolled out; the first cluster that
// stalls, is refused, remediated or paused halts it.
func (o *Options) rollWave(ctx context.Context, cl *core.Clients, obs *status.Observer, members []*member, waves [][]*member, wi int) error {
	out := o.Session.IOStreams.Out
	queue := append([]*member(nil), waves[wi]...)
	var active []*member
	for len(queue) > 0 || len(active) > 0 {
		for len(queue) > 0 && (o.MaxConcurrent == 0 || len(active) < o.MaxConcurrent) {
			m := queue[0]
			queue = queue[1:]
			if m.atTarget {
				fmt.Fprintf(out, "%s   %s: at %s already: waiting for it to roll out\n", o.clock(), m.key, o.target())
			} else {
				if why := o.edit(ctx, cl, m); why != "" {
					return o.halt(members, waves, wi, m.key, why)
				}
				fmt.Fprintf(out, "%s   %s: rolling out to %s\n", o.clock(), m.key, o.target())
			}
			obs.Forget(m.key)
			active = append(active, m)
		}
		states, err := obs.Clusters(time.Now())
		if err != nil {
			return err
		}
		if states != nil {
			var rolled []*member
			for _, m := range active {
				s, ok := states[m.key]
				if !ok {
					return o.halt(members, waves, wi, m.key, "is gone (deleted, or no longer selected by -l)")
				}
				if why := haltReason(s); why != "" {
					return o.halt(members, waves, wi, m.key, why)
				}
				if s.State == v1alpha1.ClusterUpToDate && s.Final && o.atTarget(s.Cluster) {
					rolled = append(rolled, m)
				}
			}
			if len(rolled) > 0 {
				keys := make([]string, len(rolled))
				for i, m := range rolled {
					keys[i] = m.key
				}
				ok, err := obs.Confirmed(ctx, keys)
				if err != nil {
					return err
				}
				if ok {
					for _, m := range rolled {
						fmt.Fprintf(out, "%s   %s: rolled out\n", o.clock(), m.key)
						active = slices.DeleteFunc(active, func(x *member) bool { return x == m })
					}
					continue
				}
			}
		}
		if err := obs.Wait(ctx, o.Poll); err != nil {
			return o.interrupted(err)
		}
	}
	return nil
}

// interrupted is the error of a rollout whose wait ended before its end.
func (o *Options) interrupted(err error) error {
	return fmt.Errorf("the rollout to %s stopped: %w; clusters already edited keep rolling out: run the same command again to go on where it stopped", o.target(), err)
}

// haltReason is why a cluster's state halts the rollout; "" when it does
// not.
func haltReason(s status.ObservedCluster) string {
	if c := apimeta.FindStatusCondition(s.Cluster.Status.Conditions, clusterv1.ClusterRemediatingCondition); c != nil && c.Status == "True" {
		return "is being remediated: " + core.ConditionLine(c.Message)
	}
	switch s.State {
	case v1alpha1.ClusterRefused:
		return "was refused: " + s.Reason
	case v1alpha1.ClusterStalled:
		return "stalled: " + s.Reason
	case v1alpha1.ClusterPaused:
		return "is paused (" + s.Reason + "): resume it (rollout resume cluster/" + s.Name + ")"
	}
	return ""
}

// edit changes the cluster's topology: one patch with the resourceVersion
// read as its precondition, read again and checked again on a conflict.
// It returns why the edit failed, "" once it is stored (or found stored).
func (o *Options) edit(ctx context.Context, cl *core.Clients, m *member) string {
	err, exhausted := o.send(ctx, cl, m, core.DryRunNone)
	switch {
	case exhausted:
		return fmt.Sprintf("kept changing (%d conflicts), so it was not edited", core.MaxAttempts)
	case err != nil:
		return "could not be edited: " + err.Error()
	}
	m.atTarget = true
	return ""
}

// send patches the cluster's topology (a server-side dry run with
// DryRunServer): one request with the resourceVersion read as its
// precondition; on a conflict (its controllers write its status all the
// time) it is read again, and sent again unless it is at the target by
// then. It returns the last error, and whether the conflicts ran out.
func (o *Options) send(ctx context.Context, cl *core.Clients, m *member, dry core.DryRun) (error, bool) {
	purpose := "roll out cluster " + m.key + " to " + o.target()
	return core.RetryConflicts(func() error {
		if o.atTarget(m.cluster) {
			return nil
		}
		p, err := o.patch(m.cluster)
		if err != nil {
			return fmt.Errorf("cannot %s: %w", purpose, err)
		}
		return o.Session.Send(ctx, cl, m.cluster, types.MergePatchType, p, dry, purpose)
	}, func() error {
		o.Session.Notef("conflict: cluster %s changed after it was read; reading it again", m.key)
		obj, err := o.Session.Reread(ctx, cl, m.cluster, purpose)
		if err != nil {
			return err
		}
		m.cluster = obj.(*clusterv1.Cluster)
		return nil
	})
}

// soak waits for Soak, halting when a cluster of the wave stops being
// rolled out and healthy.
func (o *Options) soak(ctx context.Context, obs *status.Observer, members []*member, waves [][]*member, wi int) error {
	until := time.Now().Add(o.Soak)
	for {
		states, err := obs.Clusters(time.Now())
		if err != nil {
			return err
		}
		for _, m := range waves[wi] {
			s, ok := states[m.key]
			if !ok {
				return o.halt(members, waves, wi, m.key, "is gone during the soak (deleted, or no longer selected by -l)")
			}
			if why := haltReason(s); why != "" {
				return o.halt(members, waves, wi, m.key, why+", during the soak")
			}
			if s.State != v1alpha1.ClusterUpToDate {
				return o.halt(members, waves, wi, m.key, "stopped being rolled out and healthy during the soak: "+s.Reason)
			}
		}
		left := time.Until(until)
		if left <= 0 {
			return nil
		}
		if err := obs.Wait(ctx, min(left, o.Poll)); err != nil {
			return o.interrupted(err)
		}
	}
}
