package sandbox

import (
	"context"
	"encoding/pem"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/cert"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	runtimecatalog "sigs.k8s.io/cluster-api/api/runtime/catalog"
	runtimehooksv1 "sigs.k8s.io/cluster-api/api/runtime/hooks/v1alpha1"
	runtimev1 "sigs.k8s.io/cluster-api/api/runtime/v1beta2"
	"sigs.k8s.io/cluster-api/exp/runtime/server"
	"sigs.k8s.io/cluster-api/test/extension/handlers/inplaceupdate"
	"sigs.k8s.io/cluster-api/test/extension/handlers/upgradeplan"
	"sigs.k8s.io/cluster-api/util/conditions"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

const (
	// TestExtensionName is the ExtensionConfig with which Options.InPlaceUpdates
	// registers Cluster API's test extension; Cluster API names its handlers
	// HANDLER.TestExtensionName.
	TestExtensionName = "test-extension"
	// The handlers of Cluster API's test extension the sandbox serves, by
	// the names its own program (sigs.k8s.io/cluster-api/test/extension)
	// gives them.
	CanUpdateMachineHandler    = "can-update-machine"
	CanUpdateMachineSetHandler = "can-update-machineset"
	UpdateMachineHandler       = "update-machine"
	GenerateUpgradePlanHandler = "generate-upgrade-plan"
	// extensionDiscoveryTimeout bounds the wait until Cluster API has
	// discovered the extension's handlers.
	extensionDiscoveryTimeout = 2 * time.Minute
)

// testExtension is Cluster API's test extension served in this process: its
// in-place update handlers (CanUpdateMachine, CanUpdateMachineSet,
// UpdateMachine: they accept a change of a Machine's version, of KubeadmConfig
// etcd image tags and files and of a DevMachine's bootstrap timeout, and
// fake the update, which takes 15–20 s per machine) and its upgrade plan
// handler (GenerateUpgradePlan: the versions of kind's images, one per minor
// up to the target), as Cluster API's own extension program wires them.
//
// One addition: once the extension says a machine's update is done, the
// simulated node's kubelet reports the machine's version, as a real
// node's would after an in-place upgrade (Cluster API's Machine is up to
// date only then: "Node.status.nodeInfo.kubeletVersion v1.34.3, v1.35.2
// required").
type testExtension struct {
	// URL is where the extension serves (https://127.0.0.1:PORT).
	URL string
	// CABundle is the PEM of the CA that signed its serving certificate.
	CABundle []byte

	certDir string
	cancel  context.CancelFunc
	done    chan error
	client  client.Client
	// setKubelet sets the kubelet version of node in the simulated
	// workload cluster namespace/cluster.
	setKubelet func(ctx context.Context, namespace, cluster, node, version string) error
	inPlace    *inplaceupdate.ExtensionHandlers
}

// startTestExtension serves Cluster API's test extension's handlers on a
// free port of 127.0.0.1 over TLS, with a serving certificate signed by a
// new CA written into dir, and returns once the server serves. c is the
// client the handlers are given; setKubelet updates a simulated node.
func startTestExtension(ctx context.Context, c client.Client, dir string,
	setKubelet func(ctx context.Context, namespace, cluster, node, version string) error) (_ *testExtension, retErr error) {
	e := &testExtension{certDir: dir, client: c, setKubelet: setKubelet}
	defer func() {
		if retErr != nil {
			retErr = errors.Join(fmt.Errorf("serving Cluster API's test extension: %w", retErr), e.stop())
		}
	}()
	// The certificate file holds the serving certificate, then its CA.
	certPEM, keyPEM, err := cert.GenerateSelfSignedCertKey(workloadHost, []net.IP{net.ParseIP(workloadHost)}, nil)
	if err != nil {
		return nil, fmt.Errorf("generating a serving certificate: %w", err)
	}
	_, rest := pem.Decode(certPEM)
	ca, _ := pem.Decode(rest)
	if ca == nil {
		return nil, errors.New("no CA after the serving certificate")
	}
	e.CABundle = pem.EncodeToMemory(ca)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("creating %s: %w", dir, err)
	}
	if err := os.WriteFile(filepath.Join(dir, "tls.crt"), certPEM, 0o600); err != nil {
		return nil, fmt.Errorf("writing the serving certificate: %w", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "tls.key"), keyPEM, 0o600); err != nil {
		return nil, fmt.Errorf("writing the serving key: %w", err)
	}
	l, err := net.Listen("tcp", net.JoinHostPort(workloadHost, "0"))
	if err != nil {
		return nil, fmt.Errorf("finding a free port: %w", err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	if err := l.Close(); err != nil {
		return nil, fmt.Errorf("finding a free port: %w", err)
	}
	e.URL = "https://" + net.JoinHostPort(workloadHost, strconv.Itoa(port))

	catalog := runtimecatalog.New()
	if err := runtimehooksv1.AddToCatalog(catalog); err != nil {
		return nil, fmt.Errorf("building the Runtime SDK catalog: %w", err)
	}
	srv, err := server.New(server.Options{Catalog: catalog, Host: workloadHost, Port: port, CertDir: dir})
	if err != nil {
		return nil, fmt.Errorf("creating the server: %w", err)
	}
	e.inPlace = inplaceupdate.NewExtensionHandlers(c)
	plans := upgradeplan.NewExtensionHandlers(c)
	for _, h := range []server.ExtensionHandler{
		{Hook: runtimehooksv1.CanUpdateMachine, Name: CanUpdateMachineHandler, HandlerFunc: e.inPlace.DoCanUpdateMachine},
		{Hook: runtimehooksv1.CanUpdateMachineSet, Name: CanUpdateMachineSetHandler, HandlerFunc: e.inPlace.DoCanUpdateMachineSet},
		{Hook: runtimehooksv1.UpdateMachine, Name: UpdateMachineHandler, HandlerFunc: e.updateMachine},
		{Hook: runtimehooksv1.GenerateUpgradePlan, Name: GenerateUpgradePlanHandler, HandlerFunc: plans.DoGenerateUpgradePlan},
	} {
		if err := srv.AddExtensionHandler(h); err != nil {
			return nil, fmt.Errorf("adding the %s handler: %w", h.Name, err)
		}
	}
	runCtx, cancel := context.WithCancel(context.Background())
	e.cancel, e.done = cancel, make(chan error, 1)
	go func() { e.done <- srv.Start(runCtx) }()
	started := srv.StartedChecker()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	timeout := time.After(30 * time.Second)
	for started(nil) != nil {
		select {
		case err := <-e.done:
			e.done <- err
			return nil, fmt.Errorf("the server stopped while starting: %w", err)
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-timeout:
			return nil, fmt.Errorf("the server did not start within 30s: %w", started(nil))
		case <-tick.C:
		}
	}
	return e, nil
}

// updateMachine is the test extension's UpdateMachine handler; once it
// says the update is done, the machine's simulated node reports the
// machine's new version. Should that fail, the answer asks Cluster API to
// call again (and the test extension starts its fake update over).
func (e *testExtension) updateMachine(ctx context.Context, req *runtimehooksv1.UpdateMachineRequest, resp *runtimehooksv1.UpdateMachineResponse) {
	e.inPlace.DoUpdateMachine(ctx, req, resp)
	if resp.Status != runtimehooksv1.ResponseStatusSuccess || resp.RetryAfterSeconds != 0 {
		return
	}
	if err := e.upgradeNode(ctx, &req.Desired.Machine); err != nil {
		resp.RetryAfterSeconds = 5
		resp.Message = "updating the simulated node: " + err.Error()
	}
}

// upgradeNode sets the kubelet version of machine's node to its version.
func (e *testExtension) upgradeNode(ctx context.Context, desired *clusterv1.Machine) error {
	m := &clusterv1.Machine{}
	if err := e.client.Get(ctx, client.ObjectKeyFromObject(desired), m); err != nil {
		return fmt.Errorf("reading Machine %s: %w", desired.Name, err)
	}
	if !m.Status.NodeRef.IsDefined() {
		return fmt.Errorf("no node for Machine %s yet", m.Name)
	}
	return e.setKubelet(ctx, m.Namespace, m.Spec.ClusterName, m.Status.NodeRef.Name, desired.Spec.Version)
}

// register creates the ExtensionConfig TestExtensionName that points
// Cluster API at the extension, and waits until Cluster API has discovered
// its handlers (the ExtensionConfig's Discovered condition and its
// status.handlers).
func (e *testExtension) register(ctx context.Context, c client.Client) error {
	ext := &runtimev1.ExtensionConfig{
		ObjectMeta: metav1.ObjectMeta{Name: TestExtensionName},
		Spec:       runtimev1.ExtensionConfigSpec{ClientConfig: runtimev1.ClientConfig{URL: e.URL, CABundle: e.CABundle}},
	}
	if err := c.Create(ctx, ext); err != nil {
		return fmt.Errorf("registering Cluster API's test extension: %w", err)
	}
	waitCtx, cancel := context.WithTimeout(ctx, extensionDiscoveryTimeout)
	defer cancel()
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	last := "not read yet"
	for {
		got := &runtimev1.ExtensionConfig{}
		if err := c.Get(waitCtx, client.ObjectKeyFromObject(ext), got); err != nil {
			last = err.Error()
		} else if cond := conditions.Get(got, runtimev1.ExtensionConfigDiscoveredCondition); cond == nil {
			last = "no Discovered condition"
		} else if cond.Status != metav1.ConditionTrue || len(got.Status.Handlers) == 0 {
			last = fmt.Sprintf("Discovered %s: %s", cond.Status, cond.Message)
		} else {
			return nil
		}
		select {
		case <-waitCtx.Done():
			return fmt.Errorf("ExtensionConfig %s not discovered by Cluster API (%s): %w", TestExtensionName, last, waitCtx.Err())
		case <-tick.C:
		}
	}
}

// stop stops the server and removes its certificate directory.
func (e *testExtension) stop() error {
	if e == nil {
		return nil
	}
	var errs []error
	if e.cancel != nil {
		e.cancel()
		select {
		case err := <-e.done:
			if err != nil {
				errs = append(errs, fmt.Errorf("the test extension's server: %w", err))
			}
		case <-time.After(10 * time.Second):
			errs = append(errs, errors.New("the test extension's server did not stop within 10s"))
		}
	}
	if err := os.RemoveAll(e.certDir); err != nil {
		errs = append(errs, fmt.Errorf("removing the test extension's certificates: %w", err))
	}
	return errors.Join(errs...)
}
