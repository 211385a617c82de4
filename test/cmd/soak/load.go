package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/util/retry"
	controlplanev1 "sigs.k8s.io/cluster-api/api/controlplane/kubeadm/v1beta2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/rollout-guard/rollout-guard/kinds"
	"github.com/rollout-guard/rollout-guard/revisions"
	"github.com/rollout-guard/rollout-guard/test/builder"
	"github.com/rollout-guard/rollout-guard/test/framework"
	"github.com/rollout-guard/rollout-guard/test/sandbox"
)

// Labels and versions the writers use.
const (
	poolLabel   = "soak.rollout-guard.io/pool"
	flavorLabel = "soak.rollout-guard.io/flavor" // on the machine template: new content, in place
	touchLabel  = "soak.rollout-guard.io/touch"  // on the object: never reaches the guard
	// The demo's control plane runs cpVersionLow or cpVersionHigh, and the
	// pools poolVersionLow or poolVersionHigh: patch-level changes, which
	// every rule allows (rules compare minors), so no edit may be refused.
	cpVersionLow    = "v1.35.2"
	cpVersionHigh   = "v1.35.3"
	poolVersionLow  = "v1.35.1"
	poolVersionHigh = "v1.35.2"
)

// flavors cycle on the pools' machine templates. With two templates, two
// versions and four flavors (none, as created, then these three), a pool
// has at most 2*2*4 = 16 contents, below the guard's default history limit
// (20): nothing a soaked object ever ran is pruned, so every persisted
// content must be in history at the end.
var flavors = []string{"a", "b", "c"}

// conflictBackoff is how a writer retries on conflicts (as client-go's
// RetryOnConflict users do), longer than retry.DefaultRetry because four
// writers and Cluster API's controllers share the objects.
var conflictBackoff = wait.Backoff{Steps: 10, Duration: 10 * time.Millisecond, Factor: 2, Jitter: 0.5}

// Event is a fault the soak injected.
type Event struct {
	At     time.Duration
	Name   string
	Detail string
	Failed bool
}

// soak is one run.
type soak struct {
	o     options
	sb    *sandbox.Sandbox
	demo  sandbox.ClusterSpec
	ns    string
	pools []string // the empty pools the writers edit
	// restartPool is the empty pool `rollout restart` restarts (the demo's
	// worker pool is restarted every fourth time).
	restartPool string
	begin       time.Time
	end         time.Time

	mu        sync.Mutex
	outcomes  []Outcome
	windows   []Window
	events    []Event
	pending   []string          // events since the last sample
	seen      map[string][]Seen // object → versions persisted
	watchGaps int

	okEdits, okPoliced, failedEdits atomic.Int64
	lastKCP                         atomic.Int64 // unix nanoseconds of the last control-plane edit
	kcpEdits                        atomic.Int64
}

// objectKey names a soaked object in the maps.
func objectKey(obj client.Object) string {
	switch obj.(type) {
	case *clusterv1.MachineDeployment:
		return "MachineDeployment/" + obj.GetName()
	case *controlplanev1.KubeadmControlPlane:
		return "KubeadmControlPlane/" + obj.GetName()
	}
	return fmt.Sprintf("%T/%s", obj, obj.GetName())
}

// soaked reports whether obj is one of the objects whose history is checked.
func (s *soak) soaked(obj client.Object) bool {
	switch obj.(type) {
	case *clusterv1.MachineDeployment:
		name := obj.GetName()
		return name == s.demo.MachineDeploymentName() || name == s.restartPool || contains(s.pools, name)
	case *controlplanev1.KubeadmControlPlane:
		return obj.GetName() == s.demo.ControlPlaneName()
	}
	return false
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// noteSeen records a persisted version of a soaked object.
func (s *soak) noteSeen(obj client.Object) {
	if !s.soaked(obj) {
		return
	}
	kind, ok := kinds.HistoryOf(obj)
	if !ok {
		return
	}
	snap, err := kind.Snapshot(obj)
	if err != nil {
		fmt.Fprintf(os.Stderr, "soak: snapshot of %s: %v\n", objectKey(obj), err)
		return
	}
	rec, _ := revisions.RecordFromAnnotations(obj.GetAnnotations())
	s.mu.Lock()
	s.seen[objectKey(obj)] = append(s.seen[objectKey(obj)], Seen{Hash: snap.Hash, Revision: rec.Revision})
	s.mu.Unlock()
}

// starting marks the start of a fault for the next sample.
func (s *soak) starting(name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.pending = append(s.pending, name)
}

// event notes an injected fault once it is over.
func (s *soak) event(at time.Time, name, detail string, failed bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.events = append(s.events, Event{At: at.Sub(s.begin), Name: name, Detail: detail, Failed: failed})
	fmt.Printf("  %7s  %s: %s\n", at.Sub(s.begin).Round(time.Second), name, detail)
}

// record notes an edit's outcome.
func (s *soak) record(o Outcome) {
	s.mu.Lock()
	s.outcomes = append(s.outcomes, o)
	s.mu.Unlock()
	switch {
	case o.Err != "":
		s.failedEdits.Add(1)
	case policed(o.Kind):
		s.okPoliced.Add(1)
		s.okEdits.Add(1)
	default:
		s.okEdits.Add(1)
	}
}

// createPools creates the empty worker pools of the demo cluster the
// writers edit: copies of the demo's pool with no machines, so that every
// edit is judged against the control plane (and recorded) like the real
// pool's, while Cluster API has only MachineSets of 0 replicas to make.
func (s *soak) createPools(ctx context.Context) error {
	base := &clusterv1.MachineDeployment{}
	if err := s.sb.Client.Get(ctx, client.ObjectKey{Namespace: s.ns, Name: s.demo.MachineDeploymentName()}, base); err != nil {
		return fmt.Errorf("reading the demo's worker pool: %w", err)
	}
	for _, name := range append(append([]string(nil), s.pools...), s.restartPool) {
		labels := map[string]string{poolLabel: name, clusterv1.ClusterNameLabel: s.demo.Name}
		pool := builder.MachineDeployment(s.ns, name).WithSpecOf(base).
			WithLabels(map[string]string{clusterv1.ClusterNameLabel: s.demo.Name}).WithReplicas(0).WithSelector(labels).Build()
		if err := s.sb.Client.Create(ctx, pool); err != nil {
			return fmt.Errorf("creating pool %s: %w", name, err)
		}
	}
	return nil
}

// edit reads obj, changes it with mutate and writes it back, again on
// each conflict (conflictBackoff), and records the outcome. An edit
// started before the end of the load runs to its end.
func (s *soak) edit(c client.Client, writer, kind string, obj client.Object, mutate func(client.Object)) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	key := client.ObjectKeyFromObject(obj)
	start := time.Now()
	err := retry.RetryOnConflict(conflictBackoff, func() error {
		if err := c.Get(ctx, key, obj); err != nil {
			return err
		}
		mutate(obj)
		return c.Update(ctx, obj)
	})
	o := Outcome{Writer: writer, Kind: kind, Object: objectKey(obj), Start: start, End: time.Now()}
	if err != nil {
		o.Err = err.Error()
		o.Conflict = apierrors.IsConflict(err)
	} else {
		s.noteSeen(obj)
	}
	s.record(o)
}

// other returns b if cur is a, else a.
func other(cur, a, b string) string {
	if cur == a {
		return b
	}
	return a
}

// writer edits the pools (and, when due, the control plane) until ctx ends.
func (s *soak) writer(ctx context.Context, i int, c client.Client) {
	name := fmt.Sprintf("writer-%d", i)
	r := rand.New(rand.NewPCG(s.o.seed, uint64(i)))
	kinds := []string{kindTemplate, kindVersion, kindTemplateLabel, kindLabel}
	for n := 0; ctx.Err() == nil; n++ {
		if s.kcpDue() {
			s.editControlPlane(c, name)
		} else {
			pool := s.pools[r.IntN(len(s.pools))]
			kind := kinds[r.IntN(len(kinds))]
			md := builder.MachineDeployment(s.ns, pool).Build()
			s.edit(c, name, kind, md, func(o client.Object) {
				md := o.(*clusterv1.MachineDeployment)
				switch kind {
				case kindTemplate:
					ref := &md.Spec.Template.Spec.InfrastructureRef
					ref.Name = other(ref.Name, s.demo.MachineDeploymentName(), s.demo.SpareWorkerTemplate())
				case kindVersion:
					md.Spec.Template.Spec.Version = other(md.Spec.Template.Spec.Version, poolVersionLow, poolVersionHigh)
				case kindTemplateLabel:
					cur := md.Spec.Template.ObjectMeta.Labels[flavorLabel]
					next := flavors[0]
					for j, f := range flavors {
						if f == cur {
							next = flavors[(j+1)%len(flavors)]
						}
					}
					md.Spec.Template.ObjectMeta.Labels[flavorLabel] = next
				case kindLabel:
					if md.Labels == nil {
						md.Labels = map[string]string{}
					}
					md.Labels[touchLabel] = strconv.Itoa(n)
				}
			})
		}
		pause := time.Duration(float64(s.o.editPause) * (0.5 + r.Float64()))
		select {
		case <-ctx.Done():
		case <-time.After(pause):
		}
	}
}

// kcpDue reports whether a control-plane edit is due, and if so claims it.
func (s *soak) kcpDue() bool {
	now := time.Now().UnixNano()
	last := s.lastKCP.Load()
	if now-last < int64(s.o.kcpEvery) {
		return false
	}
	return s.lastKCP.CompareAndSwap(last, now)
}

// editControlPlane switches the demo control plane's template or its
// patch version, alternately: each rolls its one machine.
func (s *soak) editControlPlane(c client.Client, writer string) {
	kind := kindTemplate
	if s.kcpEdits.Add(1)%2 == 0 {
		kind = kindVersion
	}
	kcp := builder.KubeadmControlPlane(s.ns, s.demo.ControlPlaneName()).Build()
	s.edit(c, writer, kind, kcp, func(o client.Object) {
		kcp := o.(*controlplanev1.KubeadmControlPlane)
		if kind == kindTemplate {
			ref := &kcp.Spec.MachineTemplate.Spec.InfrastructureRef
			ref.Name = other(ref.Name, s.demo.ControlPlaneName(), s.demo.SpareControlPlaneTemplate())
		} else {
			kcp.Spec.Version = other(kcp.Spec.Version, cpVersionLow, cpVersionHigh)
		}
	})
}

// restarter runs `rollout restart` every restartEvery: of the empty
// restart pool, and every fourth time of the demo's worker pool (whose
// machines are then replaced).
func (s *soak) restarter(ctx context.Context, cacheDir string) {
	for n := 0; ; n++ {
		select {
		case <-ctx.Done():
			return
		case <-time.After(s.o.restartEvery):
		}
		target := s.restartPool
		if n%4 == 3 {
			target = s.demo.MachineDeploymentName()
		}
		start := time.Now()
		r := s.sb.RunCLI(cacheDir, s.ns, "restart", "md/"+target)
		o := Outcome{Writer: "rollout-cli", Kind: kindRestart, Object: "MachineDeployment/" + target, Start: start, End: time.Now()}
		if r.Code != 0 {
			o.Err = fmt.Sprintf("exit %d: %s", r.Code, strings.TrimSpace(r.Stderr))
			o.Conflict = strings.Contains(r.Stderr, "kept changing")
		}
		s.record(o)
	}
}

// faults restarts kube-apiserver every apiEvery and rotates the guard's
// serving certificate every rotateEvery, one after the other, none in the
// last 30 s of the run. It returns when ctx ends and the fault in progress
// is over.
func (s *soak) faults(ctx context.Context) {
	apiNext := s.begin.Add(s.o.apiEvery / 2)
	rotNext := s.begin.Add(s.o.rotateEvery * 3 / 4)
	lastStart := s.end.Add(-30 * time.Second)
	for {
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Second):
		}
		now := time.Now()
		switch {
		case !now.Before(apiNext) && now.Before(lastStart):
			apiNext = apiNext.Add(s.o.apiEvery)
			s.restartAPIServer()
		case !now.Before(rotNext) && now.Before(lastStart):
			rotNext = rotNext.Add(s.o.rotateEvery)
			s.rotateCertificate()
		}
	}
}

// restartAPIServer restarts kube-apiserver and notes its window: from the
// signal until restartGrace after it is ready again.
func (s *soak) restartAPIServer() {
	s.starting("apiserver-restart")
	from := time.Now()
	// Not bound by the run's context: a restart is always completed.
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	res, err := s.sb.Env.RestartAPIServer(ctx, framework.APIServerRestart{Down: s.o.apiDown})
	ready := time.Now()
	s.mu.Lock()
	s.windows = append(s.windows, Window{From: from, Ready: ready, To: ready.Add(s.o.restartGrace)})
	s.mu.Unlock()
	if err != nil {
		s.event(from, "apiserver-restart", fmt.Sprintf("FAILED: %v", err), true)
		return
	}
	s.event(from, "apiserver-restart", fmt.Sprintf("stopped in %s (killed: %v), down %s, ready %s after its start; window until %s after ready",
		res.Stopped.Round(100*time.Millisecond), res.Killed, s.o.apiDown, res.Ready.Round(100*time.Millisecond), s.o.restartGrace), false)
}

// rotateCertificate replaces the guard's serving certificate and CA as
// test/install/rotation_test.go does: trust old and new CA, write the new
// pair, wait until the guard serves it, trust the new CA only. Between the
// caBundle steps it waits rotateSettle for the API server to read the
// webhook configurations again.
func (s *soak) rotateCertificate() {
	s.starting("cert-rotation")
	from := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	fail := func(step string, err error) {
		s.event(from, "cert-rotation", fmt.Sprintf("FAILED at %s: %v", step, err), true)
	}
	pair, err := newServingPair(fmt.Sprintf("rollout-guard-soak-ca-%d", from.Unix()))
	if err != nil {
		fail("making the certificate", err)
		return
	}
	env := s.sb.Env
	host := strings.TrimPrefix(env.GuardURL(), "https://")
	old := env.GuardCABundle()
	if err := env.SetGuardCABundle(ctx, append(append([]byte(nil), old...), pair.caPEM...)); err != nil {
		fail("trusting both CAs", err)
		return
	}
	time.Sleep(s.o.rotateSettle)
	written := time.Now()
	if err := env.WriteGuardServingCert(pair.certPEM, pair.keyPEM); err != nil {
		fail("writing the new certificate", err)
		return
	}
	var pickedUp time.Duration
	for {
		serial, err := servedSerial(host)
		if err == nil && serial.Cmp(pair.serial) == 0 {
			pickedUp = time.Since(written)
			break
		}
		if time.Since(written) > 30*time.Second {
			fail("waiting for the guard to serve the new certificate", fmt.Errorf("still not served after 30s (last error %v)", err))
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	time.Sleep(s.o.rotateSettle)
	if err := env.SetGuardCABundle(ctx, pair.caPEM); err != nil {
		fail("trusting the new CA only", err)
		return
	}
	s.event(from, "cert-rotation", fmt.Sprintf("new certificate served %s after it was written (same guard process); whole swap %s",
		pickedUp.Round(time.Millisecond), time.Since(from).Round(100*time.Millisecond)), false)
}
