package upgradehold

import (
	"cmp"
	"fmt"
	"slices"
	"time"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	"github.com/rollout-guard/rollout-guard/waves"
)

// Outcomes of a BeforeClusterUpgrade call, as Decision.Outcome and the
// answers metric name them.
const (
	// OutcomeHeld: an earlier wave is not done or not soaked.
	OutcomeHeld = "held"
	// OutcomeReleased: the Cluster is in a wave and nothing holds it.
	OutcomeReleased = "released"
	// OutcomeNoWave: the Cluster carries no wave label (or is gone).
	OutcomeNoWave = "no-wave"
	// OutcomeBadLabel: the Cluster's wave label is not a wave.
	OutcomeBadLabel = "bad-label"
	// OutcomeFailedOpen: the Clusters could not be read; not held.
	OutcomeFailedOpen = "failed-open"
	// OutcomeBadRequest: the request could not be read; a Failure answer.
	OutcomeBadRequest = "bad-request"
)

// Retry intervals of a held answer. While a Cluster of an earlier wave is
// still upgrading nothing tells when it will be done, so Cluster API asks
// again after PollInterval; while it soaks, after the soak time left,
// within [MinRetry, MaxRetry] so that a long soak is still re-read now and
// then (an earlier wave that breaks again, a label moved).
const (
	PollInterval = 10 * time.Second
	MinRetry     = 1 * time.Second
	MaxRetry     = 30 * time.Second
)

// Input is what one decision is made of: the Cluster Cluster API is about
// to upgrade (Namespace, Name), the version it upgrades to, and the
// Clusters read live.
type Input struct {
	// Namespace and Name identify the Cluster being upgraded.
	Namespace, Name string
	// ToVersion is the version Cluster API is about to start upgrading it
	// to (the request's toKubernetesVersion).
	ToVersion string
	// Clusters are the Clusters read from the API server: those of
	// Namespace that carry the wave label. Clusters of other namespaces
	// are ignored; the requested Cluster is found among them by name.
	Clusters []clusterv1.Cluster
	// Soak is how long a Cluster of an earlier wave must have stayed done
	// before a later wave starts (--wave-soak).
	Soak time.Duration
	// Now is the time of the decision.
	Now time.Time
}

// Decision is the answer to one BeforeClusterUpgrade call.
type Decision struct {
	// Hold reports that the upgrade must wait; RetryAfter is then when
	// Cluster API should ask again (whole seconds, at least MinRetry).
	Hold       bool
	RetryAfter time.Duration
	// Message says why, naming the Cluster that holds the upgrade;
	// Cluster API shows it in the held Cluster's TopologyReconciled
	// condition.
	Message string
	// Outcome is one of the Outcome constants.
	Outcome string
}

// holder is a Cluster of an earlier wave moving to the same version that
// is not done, or not soaked.
type holder struct {
	wave     int
	name     string
	progress waves.Progress
	// left is the soak time left; zero while not done.
	left time.Duration
}

// Decide decides whether the upgrade of in's Cluster to in.ToVersion waits
// for an earlier wave. It holds while any Cluster of in.Namespace in an
// earlier wave (a lower rollout-guard.io/wave) whose spec.topology.version
// is in.ToVersion is not done upgrading to it (waves.At) or has not stayed
// done for in.Soak. A Cluster of an earlier wave at another version (not
// moving to this one, or already past it) does not hold; nor does one
// being deleted (it will never finish), nor one whose own label is not a
// wave. Pure: the Clusters are read by the caller.
func Decide(in Input) Decision {
	id := in.Namespace + "/" + in.Name
	var self *clusterv1.Cluster
	for i := range in.Clusters {
		if c := &in.Clusters[i]; c.Namespace == in.Namespace && c.Name == in.Name {
			self = c
		}
	}
	if self == nil {
		return Decision{Outcome: OutcomeNoWave, Message: fmt.Sprintf("not held by rollout-guard: cluster %s carries no label %s", id, waves.Label)}
	}
	wave, ok, err := waves.Of(self.Labels)
	if err != nil {
		return Decision{Outcome: OutcomeBadLabel, Message: fmt.Sprintf("not held by rollout-guard: cluster %s is in no wave: %v", id, err)}
	}
	if !ok {
		return Decision{Outcome: OutcomeNoWave, Message: fmt.Sprintf("not held by rollout-guard: cluster %s carries no label %s", id, waves.Label)}
	}

	var upgrading, soaking []holder
	for i := range in.Clusters {
		c := &in.Clusters[i]
		if c.Namespace != in.Namespace || c.Name == in.Name || !c.DeletionTimestamp.IsZero() {
			continue
		}
		w, ok, err := waves.Of(c.Labels)
		if err != nil || !ok || w >= wave || c.Spec.Topology.Version != in.ToVersion {
			continue
		}
		p := waves.At(c, in.ToVersion)
		switch {
		case !p.Done:
			upgrading = append(upgrading, holder{wave: w, name: c.Name, progress: p})
		case !p.Soaked(in.Soak, in.Now):
			soaking = append(soaking, holder{wave: w, name: c.Name, progress: p, left: p.Since.Add(in.Soak).Sub(in.Now)})
		}
	}

	if len(upgrading) > 0 {
		// The earliest wave first: it is the one that goes first.
		slices.SortFunc(upgrading, func(a, b holder) int { return cmp.Or(cmp.Compare(a.wave, b.wave), cmp.Compare(a.name, b.name)) })
		h := upgrading[0]
		return Decision{Hold: true, RetryAfter: PollInterval, Outcome: OutcomeHeld,
			Message: fmt.Sprintf("held by rollout-guard: wave %d is not done upgrading to %s: cluster %s: %s%s",
				h.wave, in.ToVersion, h.name, h.progress.Waiting, more(len(upgrading)+len(soaking)-1))}
	}
	if len(soaking) > 0 {
		// The one with the most soak left: the upgrade waits for it last.
		slices.SortFunc(soaking, func(a, b holder) int {
			return cmp.Or(cmp.Compare(b.left, a.left), cmp.Compare(a.wave, b.wave), cmp.Compare(a.name, b.name))
		})
		h := soaking[0]
		// Truncated, so that a Cluster not yet soaked never reads as done
		// for as long as the soak.
		ago := max(in.Now.Sub(h.progress.Since), 0).Truncate(time.Second)
		return Decision{Hold: true, RetryAfter: retryAfter(h.left), Outcome: OutcomeHeld,
			Message: fmt.Sprintf("held by rollout-guard: wave %d has not soaked yet at %s: cluster %s: done %s ago, soak %s%s",
				h.wave, in.ToVersion, h.name, ago, in.Soak, more(len(soaking)-1))}
	}
	if wave == 0 {
		return Decision{Outcome: OutcomeReleased, Message: fmt.Sprintf("not held by rollout-guard: cluster %s is in wave 0, which goes first", id)}
	}
	return Decision{Outcome: OutcomeReleased,
		Message: fmt.Sprintf("not held by rollout-guard: no cluster of an earlier wave than %d in namespace %s is upgrading to %s or soaking there", wave, in.Namespace, in.ToVersion)}
}

// more names how many other Clusters hold the upgrade too.
func more(n int) string {
	switch n {
	case 0:
		return ""
	case 1:
		return " (and 1 more cluster of an earlier wave)"
	default:
		return fmt.Sprintf(" (and %d more clusters of earlier waves)", n)
	}
}

// retryAfter is the soak time left in whole seconds, rounded up, within
// [MinRetry, MaxRetry].
func retryAfter(left time.Duration) time.Duration {
	return min(max((left+time.Second-1).Truncate(time.Second), MinRetry), MaxRetry)
}
