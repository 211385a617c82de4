package plan

import (
	"fmt"
	"io"
	"strings"

	"k8s.io/cli-runtime/pkg/printers"

	"github.com/rollout-guard/rollout-guard/rollout/api/v1alpha1"
	"github.com/rollout-guard/rollout-guard/rollout/internal/core"
)

// writePlan prints a plan for people: per object its verdict, changes,
// steps, strategy, machines, holds and duration, then one line of
// conclusion.
func writePlan(out io.Writer, p *v1alpha1.RolloutPlan) error {
	for i, op := range p.Objects {
		if i > 0 {
			fmt.Fprintln(out)
		}
		if err := writeObjectPlan(out, op); err != nil {
			return err
		}
	}
	if len(p.Objects) > 0 {
		fmt.Fprintln(out)
	}
	if len(p.Clusters) > 0 {
		if err := writeClusters(out, p.Clusters); err != nil {
			return err
		}
		fmt.Fprintln(out)
		fmt.Fprintln(out, fleetText(p.Fleet))
	}
	_, err := fmt.Fprintln(out, planConclusion(p))
	return err
}

// writeClusters prints one line per Cluster of a change the topology
// controller carries out, with why it is refused or not computed.
func writeClusters(out io.Writer, cps []v1alpha1.ClusterPlan) error {
	fmt.Fprintln(out, "Clusters (what the topology controller would write, computed with Cluster API's own reconciler):")
	w := printers.GetNewTabWriter(out)
	fmt.Fprintln(w, "  CLUSTER\tCLASS\tRESULT\tCONTROL PLANE\tWORKERS\tOBJECTS")
	for _, cp := range cps {
		objects := strings.Join(cp.Objects, ",")
		if objects == "" {
			objects = "-"
		}
		fmt.Fprintf(w, "  %s\t%s\t%s\t%d replaced\t%d replaced\t%s\n", cp.Cluster.Namespace+"/"+cp.Cluster.Name, cp.Class, cp.Result, cp.ControlPlaneReplace, cp.WorkerReplace, objects)
	}
	if err := w.Flush(); err != nil {
		return err
	}
	for _, cp := range cps {
		if cp.Reason != "" {
			fmt.Fprintf(out, "  %s %s: %s\n", cp.Cluster.Name, cp.Result, cp.Reason)
		}
		for _, t := range cp.TemplatesRotated {
			fmt.Fprintf(out, "  %s: template rotated: %s\n", cp.Cluster.Name, t)
		}
	}
	return nil
}

// fleetText is the fleet's totals on one line: "Fleet: 3 clusters, 3
// control-plane and 9 worker machines replaced, 1 cluster would be
// refused".
func fleetText(t *v1alpha1.FleetTotals) string {
	if t == nil {
		return ""
	}
	s := fmt.Sprintf("Fleet: %d %s (%d changed, %d unchanged), %d control-plane and %d worker %s replaced", t.Clusters, core.Plural(t.Clusters, "cluster", "clusters"), t.Changed, t.Unchanged,
		t.ControlPlaneReplace, t.WorkerReplace, core.Plural(t.WorkerReplace, "machine", "machines"))
	if t.Refused > 0 {
		s += fmt.Sprintf(", %d %s would be REFUSED", t.Refused, core.Plural(t.Refused, "cluster", "clusters"))
	}
	if t.NotComputed > 0 {
		s += fmt.Sprintf(", %d could not be computed", t.NotComputed)
	}
	return s + "."
}

// planConclusion is the last line of a plan.
func planConclusion(p *v1alpha1.RolloutPlan) string {
	var c v1alpha1.PlanCounts
	refused := 0
	for _, op := range p.Objects {
		c.Replace += op.Counts.Replace
		c.InPlace += op.Counts.InPlace
		c.Untouched += op.Counts.Untouched
		if !op.Verdict.Admitted {
			refused++
		}
	}
	verdict := "would be admitted"
	if refused > 0 {
		verdict = fmt.Sprintf("would be REFUSED (%d of %d %s)", refused, len(p.Objects), core.Plural(len(p.Objects), "object", "objects"))
	}
	how := "server-side dry run"
	for _, op := range p.Objects {
		if op.Verdict.Local {
			how = "local: rollout-guard's policy evaluated here, no dry run"
		}
	}
	return fmt.Sprintf("Plan: %s; %s; nothing was changed (%s).", verdict, countsText(c), how)
}

// countsText is "3 machines replaced, 0 in place, 1 untouched".
func countsText(c v1alpha1.PlanCounts) string {
	return fmt.Sprintf("%d %s replaced, %d in place, %d untouched", c.Replace, core.Plural(c.Replace, "machine", "machines"), c.InPlace, c.Untouched)
}

// writeObjectPlan prints the plan of one object, part by part: its head,
// verdict, changes, steps, machines, holds and duration.
func writeObjectPlan(out io.Writer, op v1alpha1.ObjectPlan) error {
	for _, write := range []func(io.Writer, v1alpha1.ObjectPlan) error{
		writePlanHead, writeVerdict, writeChanges, writeSteps, writeMachines, writeHolds, writeDuration,
	} {
		if err := write(out, op); err != nil {
			return err
		}
	}
	return nil
}

// writePlanHead writes the object, its effect and summary, and the object
// a change is edited through.
func writePlanHead(out io.Writer, op v1alpha1.ObjectPlan) error {
	head := fmt.Sprintf("%s (namespace %s): %s", op.Object, op.Object.Namespace, op.Effect)
	if op.Summary != "" {
		head += " — " + op.Summary
	}
	fmt.Fprintln(out, head)
	if t := op.EditedThrough; t != nil {
		fmt.Fprintf(out, "  Edited through: %s (the topology controller passes the change on)\n", t)
	}
	return nil
}

// writeVerdict writes the dry run's verdict: admitted, or who refused and
// why; then the API server's warnings.
func writeVerdict(out io.Writer, op v1alpha1.ObjectPlan) error {
	v := op.Verdict
	switch {
	case v.Admitted && v.Local:
		fmt.Fprintln(out, "  Verdict:  admitted by rollout-guard's policy, evaluated here (local: Cluster API's webhooks and the API server's validation not asked)")
	case v.Admitted:
		fmt.Fprintln(out, "  Verdict:  admitted by the API server, rollout-guard and Cluster API's webhooks (server-side dry run)")
	default:
		who := v.RefusedBy
		var detail []string
		if v.Webhook != "" {
			detail = append(detail, "webhook "+v.Webhook)
		}
		if len(v.Rules) > 0 {
			detail = append(detail, core.Plural(len(v.Rules), "rule ", "rules ")+strings.Join(v.Rules, ", "))
		}
		if v.Local {
			detail = append(detail, "its policy evaluated here, local")
		}
		if len(detail) > 0 {
			who += " (" + strings.Join(detail, "; ") + ")"
		}
		fmt.Fprintf(out, "  Verdict:  REFUSED by %s\n", who)
		if len(v.Causes) > 0 {
			for _, c := range v.Causes {
				fmt.Fprintf(out, "            - %s\n", c)
			}
		} else {
			fmt.Fprintf(out, "            %s\n", v.Message)
		}
	}
	for _, w := range v.Warnings {
		fmt.Fprintf(out, "  Warning:  %s\n", w)
	}
	return nil
}

// writeChanges writes the fields the change changes, live and planned.
func writeChanges(out io.Writer, op v1alpha1.ObjectPlan) error {
	if len(op.Changes) == 0 {
		return nil
	}
	fmt.Fprintln(out, "  Changes:")
	return core.WriteFieldTable(out, "    ", "LIVE", "PLANNED", op.Changes)
}

// writeSteps writes the version steps of an upgrade, with the etcd
// version of each control-plane step.
func writeSteps(out io.Writer, op v1alpha1.ObjectPlan) error {
	if len(op.Steps) == 0 {
		return nil
	}
	from := ""
	if op.StepsFrom != "" {
		from = " (from " + op.StepsFrom + ")"
	}
	fmt.Fprintf(out, "  Steps%s:\n", from)
	w := printers.GetNewTabWriter(out)
	fmt.Fprintln(w, "    STEP\tPART\tVERSION\tMACHINES\tETCD")
	for i, st := range op.Steps {
		etcd := "-"
		if st.Part == core.PartControlPlane {
			etcd = "unknown"
			if st.Etcd != "" {
				etcd = st.Etcd + " (" + st.EtcdSource + ")"
			}
		}
		fmt.Fprintf(w, "    %d\t%s\t%s\t%d\t%s\n", i+1, core.PartName(st.Part), st.Version, st.Machines, etcd)
	}
	return w.Flush()
}

// writeMachines writes the rollout strategy, the machine counts and what
// the change does to each machine.
func writeMachines(out io.Writer, op v1alpha1.ObjectPlan) error {
	if op.Strategy != nil {
		fmt.Fprintf(out, "  Strategy: %s\n", op.Strategy.Description)
	}
	fmt.Fprintf(out, "  Machines: %s\n", countsText(op.Counts))
	if n, handlers := inPlaceCandidates(&v1alpha1.RolloutPlan{Objects: []v1alpha1.ObjectPlan{op}}); n > 0 {
		fmt.Fprintf(out, "  In place: %d %s %s\n", n, core.Plural(n, "machine", "machines"), inPlaceText(handlers))
	}
	if len(op.Machines) == 0 {
		return nil
	}
	w := printers.GetNewTabWriter(out)
	fmt.Fprintln(w, "    MACHINE\tOWNER\tVERSION\tACTION\tREASON")
	for _, m := range op.Machines {
		owner := m.Object
		if m.MachineSet != "" {
			owner = "machineset/" + m.MachineSet
		}
		row := fmt.Sprintf("    %s\t%s\t%s\t%s", m.Name, owner, core.OrNone(m.Version), m.Action)
		reason := m.Reason
		if m.InPlaceIfAccepted != "" {
			reason = inPlaceText(m.InPlaceIfAccepted) + ": " + reason
		}
		if reason != "" {
			row += "\t" + reason
		}
		fmt.Fprintln(w, row)
	}
	return w.Flush()
}

// writeHolds writes what would hold the change, or "none".
func writeHolds(out io.Writer, op v1alpha1.ObjectPlan) error {
	if len(op.Holds) == 0 {
		fmt.Fprintln(out, "  Holds:    none")
		return nil
	}
	fmt.Fprintln(out, "  Holds:")
	for _, h := range op.Holds {
		what := h.Kind
		if h.Check != "" {
			what += " " + h.Check
		}
		fmt.Fprintf(out, "    - [%s] %s: %s\n", what, h.Object, h.Message)
	}
	return nil
}

// writeDuration writes how long the rollout would take, or why that is
// not known.
func writeDuration(out io.Writer, op v1alpha1.ObjectPlan) error {
	d := op.Duration
	if d.Known {
		_, err := fmt.Fprintf(out, "  Duration: about %s (%s per machine: %s)\n", d.Estimate, d.PerMachine, d.Basis)
		return err
	}
	_, err := fmt.Fprintf(out, "  Duration: %s\n", d.Basis)
	return err
}
