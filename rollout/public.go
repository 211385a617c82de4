package rollout

import (
	"github.com/rollout-guard/rollout-guard/rollout/history"
	"github.com/rollout-guard/rollout-guard/rollout/internal/core"
	"github.com/rollout-guard/rollout-guard/rollout/plan"
	"github.com/rollout-guard/rollout-guard/rollout/status"
)

// Options configure the command tree: the streams, the kubectl connection
// flags, the clock, the version, the name the CLI is invoked by and the
// hook before each write (see the fields of core.Options).
type Options = core.Options

// FieldManager is the field manager of every write the CLI makes; the guard
// records it as the VIA of a revision.
const FieldManager = core.FieldManager

// TopologyFieldManager is the field manager of Cluster API's topology
// controller, whose writes history shows as the Cluster's.
const TopologyFieldManager = history.TopologyFieldManager

// Exit codes of the CLI, one per outcome across every command: those of
// every command, of `rollout status` and of `rollout plan`. 8 is kept for
// status' verdict on machines an OnDelete strategy waits to be deleted.
const (
	// ExitOK: the command did what was asked, or there was nothing to do.
	ExitOK = core.ExitOK
	// ExitError: anything else (see core.ExitError).
	ExitError = core.ExitError
	// ExitTimeout: status --timeout elapsed before the rollout was done.
	ExitTimeout = status.ExitTimeout
	// ExitStalled: status saw no progress for --progress-deadline.
	ExitStalled = status.ExitStalled
	// ExitPaused: status found the object paused, so it would never
	// roll out.
	ExitPaused = status.ExitPaused
	// ExitSuperseded: status --revision N found the object already past
	// that revision.
	ExitSuperseded = status.ExitSuperseded
	// ExitNotRolledOut: status --watch=false found the rollout not yet
	// done.
	ExitNotRolledOut = status.ExitNotRolledOut
	// ExitRefused: the change is refused by rollout-guard's policy or an
	// admission webhook (plan: or the API server); nothing was changed.
	ExitRefused = core.ExitRefused
	// ExitWaitingForDeletion: status found a MachineDeployment with the
	// OnDelete strategy waiting for its old machines to be deleted by hand.
	ExitWaitingForDeletion = status.ExitWaitingForDeletion
	// ExitWouldReplace: plan --fail-on-replace found the change would
	// replace machines.
	ExitWouldReplace = plan.ExitWouldReplace
	// ExitNotConfirmed: a restart that replaces machines was not confirmed
	// (no --yes and no terminal, or answered no); nothing was changed.
	ExitNotConfirmed = core.ExitNotConfirmed
)

// ExitStatusAnnotation is the annotation of a command of the tree NewCommand
// returns that holds its exit-status block ("Exit status:" and one line per
// code), which --help prints after the flags and the generated CLI reference
// (docs/reference/cli) shows on the command's page.
const ExitStatusAnnotation = core.ExitStatusAnnotation

// The parts of a Cluster's upgrade steps, in status and plan.
const (
	// PartControlPlane is the Cluster's control plane.
	PartControlPlane = core.PartControlPlane
	// PartWorkers are the topology's MachineDeployments and MachinePools.
	PartWorkers = core.PartWorkers
)

// The labels and annotation by which the CLI tells a GitOps controller
// manages an object.
const (
	// ArgoCDTrackingAnnotation is Argo CD's annotation tracking method.
	ArgoCDTrackingAnnotation = core.ArgoCDTrackingAnnotation
	// ArgoCDInstanceLabel is Argo CD's label tracking method.
	ArgoCDInstanceLabel = core.ArgoCDInstanceLabel
	// FluxKustomizeNameLabel is the name of the Flux Kustomization that
	// applied an object.
	FluxKustomizeNameLabel = core.FluxKustomizeNameLabel
	// FluxKustomizeNamespaceLabel is that Kustomization's namespace.
	FluxKustomizeNamespaceLabel = core.FluxKustomizeNamespaceLabel
	// FluxHelmNameLabel is the name of the Flux HelmRelease that installed
	// an object.
	FluxHelmNameLabel = core.FluxHelmNameLabel
	// FluxHelmNamespaceLabel is that HelmRelease's namespace.
	FluxHelmNamespaceLabel = core.FluxHelmNamespaceLabel
)

// ExitCode maps the error of a command to the CLI's exit code: ExitOK for
// nil, the code an error carries (status's and plan's), ExitError
// otherwise.
func ExitCode(err error) int { return core.ExitCode(err) }
