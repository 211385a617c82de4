package plan

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/rollout-guard/rollout-guard/rollout/api/v1alpha1"
	"github.com/rollout-guard/rollout-guard/rollout/internal/core"
	"github.com/rollout-guard/rollout-guard/rollout/plan/dryrun"
)

// parseVariables reads --set-variable NAME=JSON.
func (o *PlanOptions) parseVariables() error {
	for _, kv := range o.SetVariables {
		name, value, ok := strings.Cut(kv, "=")
		if !ok || name == "" {
			return fmt.Errorf("--set-variable %q: write NAME=JSON, e.g. --set-variable 'workerImage=\"img:v2\"'", kv)
		}
		if !json.Valid([]byte(value)) {
			return fmt.Errorf("--set-variable %s: the value %q is not JSON (a string is written in quotes: %s='\"%s\"')", name, value, name, value)
		}
		if o.variables == nil {
			o.variables = map[string]json.RawMessage{}
		}
		o.variables[name] = json.RawMessage(value)
	}
	return nil
}

// Exit codes of `rollout plan`, besides ExitOK and ExitError.
const (
	// ExitRefused: the change would be refused (by rollout-guard, Cluster
	// API's webhooks or the API server); the plan says by whom and why.
	ExitRefused = core.ExitRefused
	// ExitWouldReplace: with --fail-on-replace, the change would be admitted
	// and would replace at least one machine.
	ExitWouldReplace = 7
)

// planExitStatus are the exit-status lines of plan's help.
var planExitStatus = []string{
	"  0   the change would be admitted (with --fail-on-replace: and replaces no machine)",
	"  1   error: bad arguments, object, template or revision not found, permission denied,\n      API server or rollout-guard unreachable; no plan (or, for a fleet, no plan for some\n      cluster: the others are printed)",
	"  6   refused: rollout-guard's policy, Cluster API's webhooks or the API server's validation\n      would refuse it; the plan shows who and why",
	"  7   with --fail-on-replace: the change would be admitted and would replace machines",
}

// planSession is the invocation's session as plan uses it: the clients,
// streams and checks every command shares, and plan's own readings of the
// API server (its dry runs and the facts a plan is made from).
type planSession struct {
	*core.Session
	// state says whether the plan judges locally (nil: never).
	state *localState
}

// PlanOptions are the options of `rollout plan`.
type PlanOptions struct {
	// c is the invocation: its clients, streams and checks.
	c planSession
	// Output is -o: "" (a report for people), json or yaml (a RolloutPlan).
	Output string
	// Template is --template KIND/NAME: the infrastructure machine template.
	Template string
	// BootstrapTemplate is --bootstrap-template KIND/NAME (MachineDeployment).
	BootstrapTemplate string
	// Version is --version: the Kubernetes version.
	Version string
	// ToRevision is --to-revision: an undo to that revision (0: the
	// previous one).
	ToRevision int64
	// Restart is --restart: a restart now.
	Restart bool
	// Filenames are -f/--filename: edited manifests.
	Filenames []string
	// Recursive is -R/--recursive: with -f DIR, its subdirectories too.
	Recursive bool
	// FailOnReplace is --fail-on-replace: exit ExitWouldReplace when the
	// change would replace machines.
	FailOnReplace bool
	// Local is --local: judge the change with rollout-guard's policy
	// evaluated here instead of a server-side dry run (read rights only).
	Local bool
	// Class is --class [NAMESPACE/]NAME: a Cluster rebased onto another
	// ClusterClass.
	Class string
	// SetVariables are --set-variable NAME=JSON: a Cluster's topology
	// variables set.
	SetVariables []string
	// Selector is -l: which clusters of an edited ClusterClass are planned.
	Selector string
	// AllNamespaces is -A: the clusters of an edited ClusterClass in every
	// namespace (default: the class's own).
	AllNamespaces bool

	// variables are SetVariables parsed.
	variables map[string]json.RawMessage
	// runner runs Cluster API's topology reconciler as a dry run, made
	// when a change needs it.
	runner *dryrun.Runner
	// clusters are the Clusters a change the topology controller carries
	// out concerns.
	clusters []v1alpha1.ClusterPlan

	ref    core.Ref
	undo   bool
	change string
	// printFlags are -o's.
	printFlags *core.PrintFlags
}

// NewCommand returns the `rollout plan` command of the invocation c.
func NewCommand(c *core.Session) *cobra.Command {
	o := &PlanOptions{c: planSession{Session: c, state: &localState{}}, printFlags: core.NewPrintFlags()}
	cmd := &cobra.Command{
		Use:   "plan (KIND/NAME (--template KIND/NAME | --bootstrap-template KIND/NAME | --version V | --to-revision N | --restart) | cluster/NAME (--class NAME | --set-variable NAME=JSON) | -f FILE)",
		Short: "Show what a change would do, before making it: verdict, steps, machines replaced, holds",
		Long: `Preview a change without making it: the verdict (rollout-guard's and Cluster API's
webhooks, through a server-side dry run that stores nothing), the fields that change, the
steps (etcd per control-plane step), every machine replaced, updated in place or untouched,
what would hold it (pauses, MachineSet preflight checks) and how long it took last time.
The change is one the CLI makes (--template, --bootstrap-template, --version, --to-revision,
--restart; cluster/NAME --version, --class or --set-variable for a ClusterClass cluster) or
edited manifests (-f), ClusterClasses among them. What the topology controller carries out (a
class edited, a variable set, a rebase) is computed with Cluster API's own topology reconciler,
run here with every write a server-side dry run: cluster by cluster (-f of a class: its clusters,
-l and -A select), the objects it would change, their machines and verdicts, and fleet totals. It
needs read rights plus patch (a dry run is authorized as the write it previews); --local, or
a plan whose dry run is denied, evaluates rollout-guard's policy here with read rights only,
and says so. -o json|yaml prints a RolloutPlan (rollout/api/v1alpha1). More: docs/plan.md.`,
		Example: `  # Which machines would a template switch replace?
  rollout plan md/md-0 --template devmachinetemplate/md-0-v2

  # A control-plane upgrade: the machines, the etcd version, the verdict
  rollout plan kcp/my-cluster-control-plane --version v1.35.2

  # A chained upgrade of a ClusterClass cluster: every step
  rollout plan cluster/my-cluster --version v1.36.1

  # A ClusterClass edit: every cluster of the class, the machines each replaces
  rollout plan -f demo-class.yaml

  # A variable set, a rebase onto another class
  rollout plan cluster/my-cluster --set-variable 'workerImage="img:v2"'
  rollout plan cluster/my-cluster --class other-class

  # Would an undo be refused?
  rollout plan kcp/my-cluster-control-plane --to-revision 2

  # In CI: the changed manifests, failing on a refusal or on any machine replaced
  rollout plan -f clusters/prod/ -R --fail-on-replace -o json

  # With read rights only: rollout-guard's policy evaluated here, no dry run
  rollout plan kcp/my-cluster-control-plane --version v1.35.2 --local`,
		RunE: core.RunE(o),
	}
	core.SetExitStatus(cmd, planExitStatus...)
	cmd.Flags().StringVar(&o.Template, "template", "", "Plan a switch to this infrastructure machine template, KIND/NAME.")
	cmd.Flags().StringVar(&o.BootstrapTemplate, "bootstrap-template", "", "Plan a switch to this bootstrap config template, KIND/NAME (MachineDeployment).")
	cmd.Flags().StringVar(&o.Version, "version", "", "Plan a change of the Kubernetes version (cluster/NAME: spec.topology.version).")
	cmd.Flags().Int64Var(&o.ToRevision, "to-revision", 0, "Plan an undo to this revision (0: the previous revision).")
	cmd.Flags().BoolVar(&o.Restart, "restart", false, "Plan a restart now (spec.rollout.after).")
	cmd.Flags().StringSliceVarP(&o.Filenames, "filename", "f", nil, "Plan the changes in these manifests (files, directories, URLs, - for stdin), as server-side apply would make them.")
	cmd.Flags().BoolVarP(&o.Recursive, "recursive", "R", false, "With -f DIR, read its subdirectories too.")
	cmd.Flags().BoolVar(&o.FailOnReplace, "fail-on-replace", false, "Exit 7 when the change would replace any machine.")
	cmd.Flags().BoolVar(&o.Local, "local", false, "Judge the change with rollout-guard's policy evaluated here instead of a server-side dry run: needs only get, list and watch; Cluster API's webhooks and the API server's validation are not asked. KIND/NAME changes only.")
	cmd.Flags().StringVar(&o.Class, "class", "", "Plan a rebase of cluster/NAME onto this ClusterClass, [NAMESPACE/]NAME (spec.topology.classRef).")
	cmd.Flags().StringArrayVar(&o.SetVariables, "set-variable", nil, "Plan setting a topology variable of cluster/NAME, NAME=JSON (repeatable), e.g. --set-variable 'workerImage=\"img:v2\"'.")
	cmd.Flags().StringVarP(&o.Selector, "selector", "l", "", "With -f of a ClusterClass: plan only its clusters matching this label selector.")
	cmd.Flags().BoolVarP(&o.AllNamespaces, "all-namespaces", "A", false, "With -f of a ClusterClass: plan its clusters in every namespace (default: the class's namespace).")
	cmd.Flags().StringVarP(&o.Output, "output", "o", "", "Output format: json or yaml (a RolloutPlan); default a report for people.")
	return cmd
}

// Complete reads the argument and flags.
func (o *PlanOptions) Complete(cmd *cobra.Command, args []string) error {
	o.undo = cmd.Flags().Changed("to-revision")
	o.change = o.c.ChangeCause(cmd, "")
	if len(o.Filenames) > 0 {
		if len(args) > 0 {
			return fmt.Errorf("plan -f FILE takes no resource argument (the objects are in the file), got %s", strings.Join(args, " "))
		}
		return nil
	}
	ref, err := core.ParseOne("plan", args)
	if err != nil {
		if len(args) == 0 {
			return fmt.Errorf("plan needs a change: write plan KIND/NAME with --template, --version, --to-revision or --restart, or plan -f FILE (%s)", core.KindsHelp)
		}
		return err
	}
	o.ref = ref
	return nil
}

// Validate checks that exactly one change is asked and that it fits the kind.
func (o *PlanOptions) Validate() error {
	switching := o.Template != "" || o.BootstrapTemplate != "" || o.Version != "" || o.Class != "" || len(o.SetVariables) > 0
	if err := o.parseVariables(); err != nil {
		return err
	}
	modes := 0
	for _, on := range []bool{switching, o.undo, o.Restart, len(o.Filenames) > 0} {
		if on {
			modes++
		}
	}
	switch {
	case modes == 0:
		return fmt.Errorf("plan needs a change to preview: --template KIND/NAME, --bootstrap-template KIND/NAME, --version V, --to-revision N or --restart (or -f FILE)")
	case modes > 1:
		return fmt.Errorf("plan previews one change at a time: use either --template/--bootstrap-template/--version, or --to-revision, or --restart, or -f")
	}
	if o.Local && len(o.Filenames) > 0 {
		return fmt.Errorf("--local judges the changes the CLI makes (KIND/NAME with --template, --version, --to-revision or --restart); plan -f needs the server-side dry run, as server-side apply decides what the manifests change")
	}
	if o.c.state != nil {
		o.c.state.on = o.Local
	}
	if (o.Selector != "" || o.AllNamespaces) && len(o.Filenames) == 0 {
		return fmt.Errorf("-l and -A select the clusters of a ClusterClass planned with -f CLASS.yaml")
	}
	if o.Recursive && len(o.Filenames) == 0 {
		return fmt.Errorf("-R/--recursive goes with -f DIR")
	}
	if o.undo && o.ToRevision < 0 {
		return fmt.Errorf("--to-revision %d: revision numbers start at 1 (0 is the previous revision)", o.ToRevision)
	}
	if kind := o.ref.Kind; len(o.Filenames) == 0 {
		if kind.RefusePlan != nil {
			return kind.RefusePlan(o.ref)
		}
		if kind.GVK == core.Cluster.GVK && (o.Template != "" || o.BootstrapTemplate != "") {
			return fmt.Errorf("--template and --bootstrap-template work on machinedeployment and kubeadmcontrolplane objects, not %s: a ClusterClass cluster's templates are in its ClusterClass", o.ref)
		}
		if (o.Class != "" || len(o.SetVariables) > 0) && kind.GVK != core.Cluster.GVK {
			return fmt.Errorf("--class and --set-variable change a ClusterClass cluster's topology: write plan cluster/NAME --class NAME or --set-variable NAME=JSON, not %s", o.ref)
		}
		if (o.Class != "" || len(o.SetVariables) > 0) && (o.Version != "" || o.Local) {
			return fmt.Errorf("--class and --set-variable are planned by running Cluster API's topology reconciler with server-side dry runs: plan them without --version and without --local")
		}
		if kind.GVK == core.Cluster.GVK && o.undo {
			return fmt.Errorf("--to-revision works on machinedeployment and kubeadmcontrolplane objects, not %s: plan the undo of its control plane or of one of its worker pools", o.ref)
		}
		if err := kind.RefuseBootstrap(o.BootstrapTemplate); err != nil {
			return err
		}
	}
	switch strings.ToLower(o.Output) {
	case "", "json", "yaml":
	default:
		return fmt.Errorf("unknown output format %q: use -o json or -o yaml", o.Output)
	}
	o.printFlags.Output = strings.ToLower(o.Output)
	return nil
}

// Run computes the plan, prints it, and returns the verdict as the error.
func (o *PlanOptions) Run(ctx context.Context) error {
	cl, err := o.c.Clients()
	if err != nil {
		return err
	}
	var objs []v1alpha1.ObjectPlan
	switch {
	case len(o.Filenames) > 0:
		objs, err = o.planFiles(ctx, cl)
	default:
		objs, err = o.planRef(ctx, cl)
	}
	if err != nil {
		return err
	}
	plan := newRolloutPlan(o.change, objs)
	plan.Clusters, plan.Fleet = o.clusters, fleetTotals(o.clusters)
	if err := o.print(plan); err != nil {
		return err
	}
	return planVerdictError(plan, o.FailOnReplace)
}

// newRolloutPlan sums up the plans of the objects.
func newRolloutPlan(change string, objs []v1alpha1.ObjectPlan) *v1alpha1.RolloutPlan {
	p := &v1alpha1.RolloutPlan{TypeMeta: metav1.TypeMeta{APIVersion: v1alpha1.PlanAPIVersion, Kind: v1alpha1.PlanKind}, Change: change, Admitted: true, Objects: objs}
	if p.Objects == nil {
		p.Objects = []v1alpha1.ObjectPlan{}
	}
	for _, op := range objs {
		p.Admitted = p.Admitted && op.Verdict.Admitted
		p.ReplacesMachines = p.ReplacesMachines || op.Counts.Replace > 0
	}
	return p
}

// planVerdictError is the exit status of a plan as an error: nil when
// admitted (and, with failOnReplace, replacing nothing).
func planVerdictError(p *v1alpha1.RolloutPlan, failOnReplace bool) error {
	var refused, notComputed []string
	replaced := 0
	maybe, handlers := inPlaceCandidates(p)
	for _, cp := range p.Clusters {
		switch cp.Result {
		case v1alpha1.PlanClusterRefused:
			refused = append(refused, "cluster/"+cp.Cluster.Name+": "+cp.Reason)
		case v1alpha1.PlanClusterNotComputed:
			notComputed = append(notComputed, "cluster/"+cp.Cluster.Name+": "+cp.Reason)
		}
	}
	for _, op := range p.Objects {
		if !op.Verdict.Admitted && op.EditedThrough == nil {
			by := op.Verdict.RefusedBy
			if len(op.Verdict.Rules) > 0 {
				by += " (" + strings.Join(op.Verdict.Rules, ", ") + ")"
			}
			refused = append(refused, op.Object.String()+" by "+by)
		}
		replaced += op.Counts.Replace
	}
	switch {
	case len(refused) > 0:
		return core.StatusError{Code: ExitRefused, Msg: "the change would be refused: " + strings.Join(refused, "; ") + "; nothing was changed"}
	case len(notComputed) > 0:
		return fmt.Errorf("what the topology controller would do could not be computed for %d %s: %s; the plan of the others is above; nothing was changed", len(notComputed), core.Plural(len(notComputed), "cluster", "clusters"), strings.Join(notComputed, "; "))
	case failOnReplace && replaced > 0 && maybe > 0:
		return core.StatusError{Code: ExitWouldReplace, Msg: fmt.Sprintf("the change would replace %d %s (--fail-on-replace); %d of them Cluster API first offers for an in-place update to %s (with its InPlaceUpdates feature gate): whether it accepts is known only when Cluster API asks, so plan cannot promise that none is replaced; nothing was changed",
			replaced, core.Plural(replaced, "machine", "machines"), maybe, handlers)}
	case failOnReplace && replaced > 0:
		return core.StatusError{Code: ExitWouldReplace, Verdict: true, Msg: fmt.Sprintf("the change would replace %d %s (--fail-on-replace); nothing was changed", replaced, core.Plural(replaced, "machine", "machines"))}
	}
	return nil
}

// print writes the plan as a report, or as data with -o.
func (o *PlanOptions) print(p *v1alpha1.RolloutPlan) error {
	if o.printFlags.Data() {
		pr, err := o.printFlags.ToPrinter("")
		if err != nil {
			return err
		}
		return pr.PrintObj(p, o.c.IOStreams.Out)
	}
	return writePlan(o.c.IOStreams.Out, p)
}

// planRef plans a change of one named object.
func (o *PlanOptions) planRef(ctx context.Context, cl *core.Clients) ([]v1alpha1.ObjectPlan, error) {
	purpose := "plan " + o.ref.String()
	obj, err := o.c.Get(ctx, cl, o.ref, purpose)
	if err != nil {
		return nil, err
	}
	if cluster, ok := obj.(*clusterv1.Cluster); ok {
		if o.Class != "" || len(o.variables) > 0 {
			objs, cps, err := o.planClusterEdit(ctx, cl, cluster)
			o.clusters = append(o.clusters, cps...)
			return objs, err
		}
		return o.planClusterRef(ctx, cl, cluster)
	}
	var op v1alpha1.ObjectPlan
	err, exhausted := core.RetryConflicts(func() (err error) {
		op, err = o.planObjectChange(ctx, cl, obj)
		return err
	}, func() (err error) {
		o.c.Notef("conflict: %s changed after it was read; reading it again", core.Describe(obj, o.ref.Kind))
		obj, err = o.c.Reread(ctx, cl, obj, purpose)
		return err
	})
	if exhausted {
		return nil, fmt.Errorf("cannot %s: it kept changing (%d conflicts): %w", purpose, core.MaxAttempts, err)
	}
	if err != nil {
		return nil, err
	}
	return []v1alpha1.ObjectPlan{op}, nil
}

// now is the plan's clock, truncated as restart truncates it.
func (o *PlanOptions) now() time.Time {
	return o.c.Now().UTC().Truncate(time.Second)
}

// objectName is "kind/name" for messages and PlanMachine.Object.
func objectName(obj client.Object) string {
	return core.KindOf(obj).Singular() + "/" + obj.GetName()
}
