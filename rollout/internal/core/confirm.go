package core

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"sort"
	"strings"

	"golang.org/x/term"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// NotConfirmedError is a change that replaces machines and was not
// confirmed: no terminal to ask and no --yes, or the answer was no.
// Nothing was changed.
type NotConfirmedError struct {
	// Msg says what was not done and how to confirm it.
	Msg string
}

// Error says what was not done and how to confirm it.
func (e NotConfirmedError) Error() string { return e.Msg }

// ExitCode is ExitNotConfirmed.
func (e NotConfirmedError) ExitCode() int { return ExitNotConfirmed }

// Interactive reports whether a person answers at a terminal: Options.Terminal
// when set, else whether stdin and stderr are terminals.
func (c *Session) Interactive() bool {
	if c.Terminal != nil {
		return c.Terminal()
	}
	in, ok := c.IOStreams.In.(*os.File)
	if !ok || in == nil || !term.IsTerminal(int(in.Fd())) {
		return false
	}
	errOut, ok := c.IOStreams.ErrOut.(*os.File)
	return ok && errOut != nil && term.IsTerminal(int(errOut.Fd()))
}

// Ask prints what is about to happen and the question on stderr and reads
// the answer from stdin: true for "y" or "yes".
func (c *Session) Ask(lines []string, question string) (bool, error) {
	for _, l := range lines {
		fmt.Fprintln(c.IOStreams.ErrOut, l)
	}
	fmt.Fprintf(c.IOStreams.ErrOut, "%s [y/N]: ", question)
	if c.IOStreams.In == nil {
		fmt.Fprintln(c.IOStreams.ErrOut)
		return false, nil
	}
	answer, err := bufio.NewReader(c.IOStreams.In).ReadString('\n')
	if err != nil && answer == "" {
		fmt.Fprintln(c.IOStreams.ErrOut)
		return false, nil
	}
	switch strings.ToLower(strings.TrimSpace(answer)) {
	case "y", "yes":
		return true, nil
	}
	return false, nil
}

// IsControlPlane reports whether obj is a control plane (a
// KubeadmControlPlane or another provider's), or a Cluster, whose restart
// replaces its control plane's machines too.
func IsControlPlane(obj client.Object) bool {
	if _, ok := obj.(*clusterv1.Cluster); ok {
		return true
	}
	return KindOf(obj).GVK.Group == ContractGroup
}

// ReplacedMachines describes the machines a restart of obj replaces, for
// the question before it: "KubeadmControlPlane ns/cp: 3 machines (a, b,
// c)". Machines that cannot be listed are said to be so.
func ReplacedMachines(ctx context.Context, cl *Clients, obj client.Object) string {
	var sel client.MatchingLabels
	if cluster, ok := obj.(*clusterv1.Cluster); ok {
		sel = client.MatchingLabels{clusterv1.ClusterNameLabel: cluster.Name}
	} else if k := KindOf(obj); k.Machines != nil {
		sel = k.Machines(obj)
	}
	id := Describe(obj, KindOf(obj))
	if sel == nil {
		return id + ": every machine"
	}
	list := &clusterv1.MachineList{}
	if err := cl.Client.List(ctx, list, client.InNamespace(obj.GetNamespace()), sel); err != nil {
		return fmt.Sprintf("%s: every machine (they could not be listed: %v)", id, APIStatusOf(err))
	}
	names := make([]string, 0, len(list.Items))
	for _, m := range list.Items {
		names = append(names, m.Name)
	}
	sort.Strings(names)
	if len(names) == 0 {
		return id + ": no machine yet"
	}
	return fmt.Sprintf("%s: %d %s (%s)", id, len(names), Plural(len(names), "machine", "machines"), strings.Join(names, ", "))
}
