package framework

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"time"
)

const (
	// defaultProbePeriod is how often the stand-in Service probes each
	// replica's /readyz unless ReplicaOptions says otherwise.
	defaultProbePeriod = 500 * time.Millisecond
	// replicaExitTimeout bounds the wait for a signalled replica to exit.
	replicaExitTimeout = 60 * time.Second
)

// ReplicaOptions configures StartGuardReplicas.
type ReplicaOptions struct {
	// Replicas is the number of guard processes. Default 2.
	Replicas int
	// Args are extra flags for every replica, after Options.GuardArgs and
	// --leader-elect (a later flag wins).
	Args []string
	// ProbePeriod is how often the stand-in Service probes every replica's
	// /readyz; a replica is taken out after 3 failed probes in a row (the
	// kubelet's default failureThreshold), each bounded by 1s (its default
	// timeoutSeconds). Default 500ms.
	ProbePeriod time.Duration
	// EndpointLag is how long after a SIGTERM (a pod deletion) the
	// replica stops getting new connections: the time the endpoints
	// controller and kube-proxy take to take a terminating pod out of its
	// Service, whatever its readiness. Default 1s.
	EndpointLag time.Duration
}

const (
	// probeFailureThreshold and probeTimeout are the kubelet's defaults.
	probeFailureThreshold = 3
	probeTimeout          = time.Second
	// defaultEndpointLag is ReplicaOptions.EndpointLag's default.
	defaultEndpointLag = time.Second
)

// GuardReplicas is several guard processes behind one address, as the
// guard's Deployment runs behind its Service: a local TCP balancer passes
// each new connection, TLS untouched, to one of the ready replicas (at
// random), the way kube-proxy sends a new connection to a ready endpoint. A
// replica is ready from its first passing /readyz probe until 3 probes in
// a row fail, and is taken out EndpointLag after a SIGTERM (a pod deletion). A connection for which no replica is
// ready, or whose replica does not accept it, is reset at once: the API
// server sees a transport error, as it would for a Service without ready
// endpoints or a pod that stopped listening. Connections already passed to
// a replica stay with it until either side closes them.
type GuardReplicas struct {
	e           *Environment
	args        []string
	probePeriod time.Duration
	endpointLag time.Duration
	listener    net.Listener

	mu        sync.Mutex
	procs     []*guardProcess // nil when the replica is not running
	ready     []bool          // as of the probes
	failed    []int           // failed probes in a row
	removed   []bool          // taken out of the Service (terminating)
	routed    []int           // connections passed to each replica
	open      []int           // connections open to each replica now
	reset     int             // connections reset: no ready replica, or the dial failed
	probeDone chan struct{}
	cancel    context.CancelFunc
	conns     sync.WaitGroup
	active    map[net.Conn]struct{} // open connections, both sides
	stopping  bool
	stopOnce  sync.Once
	stopErr   error
}

// currentReplicas returns the running replica set, or nil.
func (e *Environment) currentReplicas() *GuardReplicas {
	e.guardMu.Lock()
	defer e.guardMu.Unlock()
	return e.replicas
}

// StartGuardReplicas stops the single guard (if running), starts
// opts.Replicas guard processes with --leader-elect behind a local
// balancer, points the guard's webhook configurations at the balancer and
// returns once every replica is ready and an admission request made
// through the API server reaches one. Stop the set with Stop, then call
// StartGuard to go back to one guard.
func (e *Environment) StartGuardReplicas(ctx context.Context, opts ReplicaOptions) (_ *GuardReplicas, retErr error) {
	if err := e.running(); err != nil {
		return nil, fmt.Errorf("starting guard replicas: %w", err)
	}
	if opts.Replicas <= 0 {
		opts.Replicas = 2
	}
	if opts.ProbePeriod <= 0 {
		opts.ProbePeriod = defaultProbePeriod
	}
	if opts.EndpointLag <= 0 {
		opts.EndpointLag = defaultEndpointLag
	}
	if err := e.StopGuard(); err != nil {
		e.logger.Error(err, "stopping the single guard")
	}
	e.guardMu.Lock()
	defer e.guardMu.Unlock()
	if e.replicas != nil {
		return nil, errors.New("starting guard replicas: a replica set is already running")
	}
	if err := checkBinary(e.BinDir, e.guardBinary()); err != nil {
		return nil, fmt.Errorf("starting guard replicas: %w", err)
	}
	if err := e.ensureGuardIdentity(ctx); err != nil {
		return nil, fmt.Errorf("starting guard replicas: %w", err)
	}
	if err := e.ensureGuardCertDir(); err != nil {
		return nil, fmt.Errorf("starting guard replicas: %w", err)
	}
	l, err := net.Listen("tcp", net.JoinHostPort(localHost, "0"))
	if err != nil {
		return nil, fmt.Errorf("starting guard replicas: listening: %w", err)
	}
	runCtx, cancel := context.WithCancel(context.Background())
	r := &GuardReplicas{
		e:           e,
		args:        append([]string{"--leader-elect", "--leader-election-namespace", GuardNamespace}, opts.Args...),
		probePeriod: opts.ProbePeriod,
		endpointLag: opts.EndpointLag,
		listener:    l,
		procs:       make([]*guardProcess, opts.Replicas),
		ready:       make([]bool, opts.Replicas),
		failed:      make([]int, opts.Replicas),
		removed:     make([]bool, opts.Replicas),
		routed:      make([]int, opts.Replicas),
		open:        make([]int, opts.Replicas),
		probeDone:   make(chan struct{}),
		cancel:      cancel,
		active:      map[net.Conn]struct{}{},
	}
	e.replicas = r
	defer func() {
		if retErr != nil {
			e.guardMu.Unlock()
			if err := r.Stop(); err != nil {
				retErr = errors.Join(retErr, err)
			}
			e.guardMu.Lock()
		}
	}()
	go r.probe(runCtx)
	go r.serve()
	for i := range opts.Replicas {
		if err := r.start(ctx, i); err != nil {
			return nil, fmt.Errorf("starting guard replicas: %w", err)
		}
	}
	if err := e.registerGuardWebhooks(ctx, r.Port()); err != nil {
		return nil, fmt.Errorf("starting guard replicas: %w", err)
	}
	if err := e.waitAdmissionRoundTrip(ctx, &guardProcess{done: make(chan struct{})}); err != nil {
		return nil, fmt.Errorf("starting guard replicas: %w", err)
	}
	e.logger.Info("guard replicas ready", "replicas", opts.Replicas, "balancer", l.Addr().String())
	return r, nil
}

// Port is the port of the balancer the webhook configurations point at.
func (r *GuardReplicas) Port() int { return r.listener.Addr().(*net.TCPAddr).Port }

// start starts replica i and waits for its /readyz. The caller holds
// e.guardMu or is the only user of r.
func (r *GuardReplicas) start(ctx context.Context, i int) error {
	ports, err := freePorts(2)
	if err != nil {
		return err
	}
	g := &guardProcess{done: make(chan struct{}), webhookPort: ports[0], healthPort: ports[1]}
	args := append([]string{
		"--kubeconfig", r.e.guardKubeconfig,
		"--webhook-host", localHost,
		"--webhook-port", strconv.Itoa(g.webhookPort),
		"--cert-dir", r.e.guardCertDir,
		"--arm-namespace", GuardNamespace,
		"--health-probe-bind-address", net.JoinHostPort(localHost, strconv.Itoa(g.healthPort)),
		"--metrics-bind-address", "0",
	}, r.e.guardClientAuthArgs()...)
	args = append(args, r.e.opts.GuardArgs...)
	args = append(args, r.args...)
	out := io.MultiWriter(r.e.log, r.e.guardTail, r.e.races)
	g.cmd = exec.Command(filepath.Join(r.e.BinDir, r.e.guardBinary()), args...)
	g.cmd.Dir = r.e.WorkDir
	g.cmd.Stdout, g.cmd.Stderr = out, out
	g.cmd.SysProcAttr = childProcAttr()
	r.e.logger.Info("starting a guard replica", "replica", i, "command", g.cmd.String())
	if err := g.cmd.Start(); err != nil {
		return fmt.Errorf("starting replica %d: %w", i, err)
	}
	go func() {
		g.exitErr = g.cmd.Wait()
		close(g.done)
	}()
	r.mu.Lock()
	r.procs[i] = g
	r.ready[i], r.failed[i], r.removed[i] = false, 0, false
	r.mu.Unlock()
	if err := waitGuardReady(ctx, g); err != nil {
		return fmt.Errorf("replica %d: %w\nlast lines of the guards' log:\n%s", i, err, r.e.guardTail.String())
	}
	return nil
}

// Start (re)starts replica i, which must not be running, and waits until
// it is ready and the balancer knows it.
func (r *GuardReplicas) Start(ctx context.Context, i int) error {
	r.mu.Lock()
	if i < 0 || i >= len(r.procs) {
		r.mu.Unlock()
		return fmt.Errorf("starting replica %d: there are %d replicas", i, len(r.procs))
	}
	if g := r.procs[i]; g != nil && !g.exited() {
		r.mu.Unlock()
		return fmt.Errorf("starting replica %d: it is running (pid %d)", i, g.cmd.Process.Pid)
	}
	r.mu.Unlock()
	if err := r.start(ctx, i); err != nil {
		return err
	}
	deadline := time.Now().Add(10 * r.probePeriod)
	for !r.Ready(i) {
		if time.Now().After(deadline) {
			return fmt.Errorf("replica %d is ready but the balancer did not see it within %s", i, 10*r.probePeriod)
		}
		time.Sleep(r.probePeriod / 4)
	}
	return nil
}

// Signal sends sig to replica i's process group without waiting. A
// SIGTERM stands for a pod deletion: EndpointLag later the replica gets no
// new connections, whatever its readiness. A SIGKILL stands for a crash:
// only failed probes take the replica out.
func (r *GuardReplicas) Signal(i int, sig syscall.Signal) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if i < 0 || i >= len(r.procs) || r.procs[i] == nil {
		return fmt.Errorf("signalling replica %d: it is not running", i)
	}
	g := r.procs[i]
	killGroup(g.cmd.Process.Pid, sig)
	if sig == syscall.SIGTERM {
		time.AfterFunc(r.endpointLag, func() {
			r.mu.Lock()
			defer r.mu.Unlock()
			if r.procs[i] == g {
				r.removed[i] = true
			}
		})
	}
	return nil
}

// Wait waits until replica i has exited and returns how it exited.
func (r *GuardReplicas) Wait(i int) error {
	r.mu.Lock()
	if i < 0 || i >= len(r.procs) || r.procs[i] == nil {
		r.mu.Unlock()
		return fmt.Errorf("waiting for replica %d: it was never started", i)
	}
	g := r.procs[i]
	r.mu.Unlock()
	select {
	case <-g.done:
		return g.exitErr
	case <-time.After(replicaExitTimeout):
		return fmt.Errorf("replica %d (pid %d) did not exit within %s", i, g.cmd.Process.Pid, replicaExitTimeout)
	}
}

// Ready reports whether the balancer sends replica i new connections.
func (r *GuardReplicas) Ready(i int) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return i >= 0 && i < len(r.ready) && r.ready[i] && !r.removed[i]
}

// Routed returns how many connections the balancer passed to each replica.
func (r *GuardReplicas) Routed() []int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]int(nil), r.routed...)
}

// Open returns how many connections are open to each replica now: the
// API server keeps its connection to a webhook open and sends every call
// over it, so the replica with an open connection is the one serving.
func (r *GuardReplicas) Open() []int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]int(nil), r.open...)
}

// Reset returns how many connections the balancer reset because no
// replica was ready or the chosen one did not accept.
func (r *GuardReplicas) Reset() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.reset
}

// Stop stops every replica (SIGTERM, SIGKILL after Options.GuardStopTimeout)
// and the balancer. The webhook configurations keep pointing at the
// balancer's address until StartGuard registers them again.
func (r *GuardReplicas) Stop() error {
	r.stopOnce.Do(func() {
		var errs []error
		r.cancel()
		_ = r.listener.Close()
		<-r.probeDone
		stopTimeout := r.e.opts.GuardStopTimeout
		if stopTimeout <= 0 {
			stopTimeout = defaultGuardStopTimeout
		}
		r.mu.Lock()
		procs := append([]*guardProcess(nil), r.procs...)
		r.mu.Unlock()
		for i, g := range procs {
			if g == nil {
				continue
			}
			pid := g.cmd.Process.Pid
			if !g.exited() {
				killGroup(pid, syscall.SIGTERM)
				select {
				case <-g.done:
				case <-time.After(stopTimeout):
					errs = append(errs, fmt.Errorf("guard replica %d (pid %d) did not stop within %s of SIGTERM; killed", i, pid, stopTimeout))
					killGroup(pid, syscall.SIGKILL)
					<-g.done
				}
			}
			killGroup(pid, syscall.SIGKILL) // anything it left behind
		}
		r.mu.Lock()
		r.stopping = true
		for c := range r.active {
			_ = c.Close()
		}
		r.mu.Unlock()
		r.conns.Wait()
		r.e.guardMu.Lock()
		if r.e.replicas == r {
			r.e.replicas = nil
		}
		r.e.guardMu.Unlock()
		r.e.logger.Info("guard replicas stopped", "routed", fmt.Sprint(r.Routed()), "reset", r.Reset())
		r.stopErr = errors.Join(errs...)
	})
	return r.stopErr
}

// probe polls every running replica's /readyz each probe period.
func (r *GuardReplicas) probe(ctx context.Context) {
	defer close(r.probeDone)
	httpClient := &http.Client{Timeout: probeTimeout}
	ticker := time.NewTicker(r.probePeriod)
	defer ticker.Stop()
	for {
		r.mu.Lock()
		procs := append([]*guardProcess(nil), r.procs...)
		r.mu.Unlock()
		ready := make([]bool, len(procs))
		for i, g := range procs {
			if g == nil || g.exited() {
				continue
			}
			url := "http://" + net.JoinHostPort(localHost, strconv.Itoa(g.healthPort)) + "/readyz"
			req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
			if err != nil {
				continue
			}
			resp, err := httpClient.Do(req)
			if err != nil {
				continue
			}
			_ = resp.Body.Close()
			ready[i] = resp.StatusCode == http.StatusOK
		}
		r.mu.Lock()
		for i := range ready {
			// Only the process that was probed: a replica restarted meanwhile
			// waits for the next probe. Ready at the first success, not
			// ready after failureThreshold failures in a row.
			if r.procs[i] != procs[i] {
				continue
			}
			if ready[i] {
				r.ready[i], r.failed[i] = true, 0
			} else if r.failed[i]++; r.failed[i] >= probeFailureThreshold {
				r.ready[i] = false
			}
		}
		r.mu.Unlock()
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
		}
	}
}

// serve accepts connections until the listener is closed.
func (r *GuardReplicas) serve() {
	for {
		conn, err := r.listener.Accept()
		if err != nil {
			return
		}
		r.conns.Add(1)
		go func() {
			defer r.conns.Done()
			r.pass(conn.(*net.TCPConn))
		}()
	}
}

// pass hands conn to a ready replica and copies bytes both ways until
// either side closes.
func (r *GuardReplicas) pass(conn *net.TCPConn) {
	defer conn.Close()
	r.mu.Lock()
	// At random among the ready replicas, as kube-proxy's rules pick an endpoint.
	var candidates []int
	for i := range r.procs {
		if r.ready[i] && !r.removed[i] && r.procs[i] != nil {
			candidates = append(candidates, i)
		}
	}
	chosen := -1
	var port int
	if len(candidates) > 0 {
		chosen = candidates[rand.IntN(len(candidates))]
		port = r.procs[chosen].webhookPort
	}
	r.mu.Unlock()
	resetConn := func() {
		r.mu.Lock()
		r.reset++
		r.mu.Unlock()
		_ = conn.SetLinger(0) // a reset, not an orderly close
	}
	if chosen < 0 {
		resetConn()
		return
	}
	backend, err := net.DialTimeout("tcp", net.JoinHostPort(localHost, strconv.Itoa(port)), 2*time.Second)
	if err != nil {
		resetConn()
		return
	}
	defer backend.Close()
	r.mu.Lock()
	if r.stopping {
		r.mu.Unlock()
		return
	}
	r.routed[chosen]++
	r.open[chosen]++
	r.active[conn], r.active[backend] = struct{}{}, struct{}{}
	r.mu.Unlock()
	defer func() {
		r.mu.Lock()
		r.open[chosen]--
		delete(r.active, conn)
		delete(r.active, backend)
		r.mu.Unlock()
	}()
	done := make(chan struct{}, 2)
	go func() {
		_, _ = io.Copy(backend, conn)
		_ = backend.(*net.TCPConn).CloseWrite()
		done <- struct{}{}
	}()
	go func() {
		_, _ = io.Copy(conn, backend)
		_ = conn.CloseWrite()
		done <- struct{}{}
	}()
	<-done
	<-done
}
