package framework

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// The node's fixed names and addresses. Only one Node runs on a machine at a
// time (StartNode waits for nodeLockFile), so they need not differ between
// test processes, and what a killed test left behind is found and removed by
// the next StartNode.
const (
	// NodePodCIDR is the range the node's Pods get their IPs from
	// (host-local IPAM on the bridge nodeBridge); the host reaches it
	// through the bridge, without kube-proxy.
	NodePodCIDR = "10.88.0.0/16"
	// nodePodGateway is the bridge's address: the Pods' default route, and
	// where the node sends what Pods address to the kubernetes Service.
	nodePodGateway = "10.88.0.1"
	// nodeBridge is the Linux bridge of the Pods' network.
	nodeBridge = "rgnode0"
	// nodeNetworkName names the Pods' CNI network.
	nodeNetworkName = "rollout-guard-node"
	// nodeNATChain is the iptables nat chain that stands in for kube-proxy
	// for the one Service Pods need: it sends the kubernetes Service's
	// ClusterIP:443 to kube-apiserver.
	nodeNATChain = "RG-NODE-APISERVER"
	// nodeStateDir holds containerd's socket and volatile state (runc's
	// state, network namespaces, mounts of running containers).
	nodeStateDir = "/run/rollout-guard-node"
	// nodeLockFile is held (flock) by the process whose Node runs.
	nodeLockFile = "/run/rollout-guard-node.lock"
	// nodeCgroupRoot is the kubelet's cgroup root: every Pod's processes
	// live under it, in every cgroup v1 hierarchy.
	nodeCgroupRoot = "/rollout-guard-node"
	// kubernetesServiceIP is the ClusterIP of the kubernetes Service with
	// envtest's service range (10.0.0.0/24): what in-cluster clients dial.
	kubernetesServiceIP = "10.0.0.1"

	// NodeSandboxImage is containerd's sandbox (pause) image, which
	// StartNode imports from BinDir/pause-image.tar (make node-tools). It is
	// also a workload: "/pause --serve :8080" answers HTTP on port 8080
	// (every path: the host name; /healthz: "ok"), as user 65532.
	NodeSandboxImage = "localhost/rollout-guard/pause:v1"
	// NodePauseImageTarball is the file name of that image in BinDir.
	NodePauseImageTarball = "pause-image.tar"

	nodeLockTimeout      = 10 * time.Minute
	nodeComponentTimeout = 60 * time.Second
	nodeReadyTimeout     = 3 * time.Minute
	nodeStopTimeout      = 20 * time.Second
	nodeCleanupTimeout   = 60 * time.Second
	nodeDefaultName      = "rollout-guard-node"
	nodePodsCertDirPerm  = 0o755
	// The Pods' view of the API server: its serving certificate and key,
	// signed by nodeAPIServerCAFile.
	nodeAPIServerCertFile = "pods-apiserver.crt"
	nodeAPIServerKeyFile  = "pods-apiserver.key"
	nodeAPIServerCAFile   = "node-ca.crt"
	// The API server's client certificate for the kubelet.
	nodeKubeletClientCertFile = "kubelet-client.crt"
	nodeKubeletClientKeyFile  = "kubelet-client.key"
)

// NodeAPIServerArgs returns the kube-apiserver flags that StartNode needs,
// for Options.APIServerArgs, and writes into dir (created) a CA, a serving
// certificate it signs for the Pods' view of the API server, and a client
// certificate it signs for the API server's calls to the kubelet:
//
//   - --enable-aggregator-routing=true: the API server calls admission
//     webhooks (and aggregated APIs) at the endpoints of their Service, a
//     Pod's IP, not at its ClusterIP, which nothing routes without
//     kube-proxy;
//   - --bind-address=0.0.0.0, and --tls-sni-cert-key serving that
//     certificate (valid for the kubernetes Service's ClusterIP and names)
//     to connections made to the Pods' gateway: a Pod's in-cluster client
//     dials the ClusterIP, which the node sends to the gateway (nodeNATChain);
//     clients of 127.0.0.1 keep envtest's certificate;
//   - --kubelet-client-certificate and --kubelet-client-key: the API server
//     authenticates to the kubelet (in group system:masters) for Pods' logs,
//     exec and port-forward, at the Node's InternalIP
//     (--kubelet-preferred-address-types; its host name, the Node's name,
//     resolves nowhere);
//   - --authorization-mode=Node,RBAC and the NodeRestriction admission
//     plugin: the kubelet runs as system:node:<name>, as in a cluster;
//   - --disable-admission-plugins= (none): envtest disables ServiceAccount,
//     which a Pod needs for its token; kube-controller-manager makes the
//     default ServiceAccounts.
func NodeAPIServerArgs(dir string) (map[string]string, error) {
	if err := os.MkdirAll(dir, nodePodsCertDirPerm); err != nil {
		return nil, fmt.Errorf("creating the directory of the node's API server certificates: %w", err)
	}
	files, err := nodeAPIServerCerts()
	if err != nil {
		return nil, fmt.Errorf("making the node's API server certificates: %w", err)
	}
	for name, data := range files {
		if err := writeFileAtomically(filepath.Join(dir, name), data, 0o600); err != nil {
			return nil, err
		}
	}
	path := func(name string) string { return filepath.Join(dir, name) }
	return map[string]string{
		"enable-aggregator-routing":       "true",
		"bind-address":                    "0.0.0.0",
		"tls-sni-cert-key":                path(nodeAPIServerCertFile) + "," + path(nodeAPIServerKeyFile) + ":" + nodePodGateway,
		"kubelet-client-certificate":      path(nodeKubeletClientCertFile),
		"kubelet-client-key":              path(nodeKubeletClientKeyFile),
		"kubelet-preferred-address-types": "InternalIP",
		"authorization-mode":              "Node,RBAC",
		"enable-admission-plugins":        "NodeRestriction",
		"disable-admission-plugins":       "",
	}, nil
}

// nodeAPIServerCerts makes the files of NodeAPIServerArgs, by name: a CA,
// a serving certificate it signs for the kubernetes Service (its ClusterIP,
// the Pods' gateway and its DNS names) and a client certificate it signs
// for the API server's calls to the kubelet.
func nodeAPIServerCerts() (map[string][]byte, error) {
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	serial, err := randomSerial()
	if err != nil {
		return nil, err
	}
	now := time.Now()
	caTmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: "rollout-guard node CA"},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(7 * 24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return nil, err
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		return nil, err
	}
	files := map[string][]byte{nodeAPIServerCAFile: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER})}
	leaf := func(certFile, keyFile string, tmpl *x509.Certificate) error {
		key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			return err
		}
		if tmpl.SerialNumber, err = randomSerial(); err != nil {
			return err
		}
		tmpl.NotBefore, tmpl.NotAfter = now.Add(-time.Hour), now.Add(7*24*time.Hour)
		tmpl.KeyUsage = x509.KeyUsageDigitalSignature
		der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
		if err != nil {
			return err
		}
		keyDER, err := x509.MarshalPKCS8PrivateKey(key)
		if err != nil {
			return err
		}
		files[certFile] = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
		files[keyFile] = pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER})
		return nil
	}
	if err := leaf(nodeAPIServerCertFile, nodeAPIServerKeyFile, &x509.Certificate{
		Subject:     pkix.Name{CommonName: "kubernetes"},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		DNSNames:    []string{"kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc.cluster.local"},
		IPAddresses: []net.IP{net.ParseIP(kubernetesServiceIP), net.ParseIP(nodePodGateway)},
	}); err != nil {
		return nil, err
	}
	if err := leaf(nodeKubeletClientCertFile, nodeKubeletClientKeyFile, &x509.Certificate{
		Subject:     pkix.Name{CommonName: "kube-apiserver-kubelet-client", Organization: []string{"system:masters"}},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}); err != nil {
		return nil, err
	}
	return files, nil
}

// NodeOptions configures StartNode.
type NodeOptions struct {
	// Name is the Node's name (the kubelet's --hostname-override).
	// Default: rollout-guard-node.
	Name string
	// Images are image tarballs (docker save or OCI archives) to import
	// into containerd before the kubelet starts, after the sandbox image.
	Images []string
}

// Node is a Kubernetes node of an Environment, on this machine: containerd
// (with its CRI plugin, runc, and a bridge CNI network on NodePodCIDR),
// kube-controller-manager, kube-scheduler and the kubelet, each a child
// process with its log in Dir. Pods' IPs are reachable from the host; the
// API server calls webhook Services at their endpoints; Pods reach the API
// server through the kubernetes Service's ClusterIP (see NodeAPIServerArgs).
// There is no kube-proxy and no cluster DNS: other ClusterIPs route nowhere.
type Node struct {
	// Name is the Node's name.
	Name string
	// Dir holds the node's files: configurations, logs (containerd.log,
	// kubelet.log, kube-controller-manager.log, kube-scheduler.log),
	// containerd's images and the kubelet's root directory.
	Dir string

	env     *Environment
	lock    *os.File
	procs   []*nodeProcess // in start order
	byName  map[string]*nodeProcess
	watcher *exec.Cmd
	socket  string
	// The local ports of the kubelet's API and /healthz, and of the
	// controllers' /healthz.
	kubeletPort, kubeletHealthzPort, kcmPort, schedulerPort int

	stopOnce sync.Once
	stopErr  error
}

// nodeProcess is a running component of a Node.
type nodeProcess struct {
	name    string
	cmd     *exec.Cmd
	log     *os.File
	tail    *tailWriter
	done    chan struct{}
	exitErr error
}

func (p *nodeProcess) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// StartNode starts a node against env, which must have been started with
// Options.APIServerArgs holding NodeAPIServerArgs, and returns once the Node
// is Ready. It needs root on Linux with cgroup v1 or v2, containerd, ctr,
// runc, the CNI plugins in /usr/lib/cni and iptables (make node-tools
// installs them with apt), and BinDir/kubelet, kube-controller-manager,
// kube-scheduler and pause-image.tar (make node-tools builds them). If
// another process runs a node, it waits for it to stop first. On error,
// everything started is stopped again; the logs stay in Dir.
//
// Stop the Node before the Environment.
func StartNode(ctx context.Context, env *Environment, opts NodeOptions) (_ *Node, retErr error) {
	begin := time.Now()
	if err := env.running(); err != nil {
		return nil, fmt.Errorf("starting a node: %w", err)
	}
	if os.Geteuid() != 0 {
		return nil, errors.New("starting a node: it needs root (containerd, the kubelet, iptables)")
	}
	podsCADir, err := nodeAPIServerArgsDir(env.opts.APIServerArgs)
	if err != nil {
		return nil, fmt.Errorf("starting a node: %w", err)
	}
	n := &Node{Name: opts.Name, Dir: filepath.Join(env.WorkDir, "node"), env: env, byName: map[string]*nodeProcess{},
		socket: filepath.Join(nodeStateDir, "containerd.sock")}
	if n.Name == "" {
		n.Name = nodeDefaultName
	}
	if err := n.checkPrerequisites(); err != nil {
		return nil, fmt.Errorf("starting a node: %w", err)
	}
	if err := os.MkdirAll(n.Dir, 0o755); err != nil {
		return nil, fmt.Errorf("starting a node: %w", err)
	}
	if err := n.acquireLock(ctx); err != nil {
		return nil, fmt.Errorf("starting a node: %w", err)
	}
	defer func() {
		if retErr != nil {
			if err := n.Stop(); err != nil {
				retErr = errors.Join(retErr, fmt.Errorf("stopping what had started: %w", err))
			}
			retErr = fmt.Errorf("starting a node: %w\n(the node's files and logs are in %s)", retErr, n.Dir)
		}
	}()
	// Whatever a node killed with its test left behind.
	if err := n.cleanup(ctx); err != nil {
		return nil, err
	}
	if err := n.writeFiles(podsCADir); err != nil {
		return nil, err
	}
	if err := n.makeCgroupRoot(); err != nil {
		return nil, err
	}
	if err := n.startWatcher(); err != nil {
		return nil, err
	}
	env.logger.Info("starting a node", "name", n.Name, "dir", n.Dir)

	if err := n.startContainerd(ctx); err != nil {
		return nil, err
	}
	if err := n.ImportImage(ctx, filepath.Join(env.BinDir, NodePauseImageTarball)); err != nil {
		return nil, err
	}
	for _, image := range opts.Images {
		if err := n.ImportImage(ctx, image); err != nil {
			return nil, err
		}
	}
	if err := n.startControllers(ctx); err != nil {
		return nil, err
	}
	if err := n.routeKubernetesService(ctx); err != nil {
		return nil, err
	}
	if err := n.startKubelet(ctx); err != nil {
		return nil, err
	}
	env.logger.Info("node ready", "name", n.Name, "after", time.Since(begin).Round(time.Millisecond).String())
	return n, nil
}

// nodeAPIServerArgsDir checks that args hold NodeAPIServerArgs and returns
// the directory of its certificates.
func nodeAPIServerArgsDir(args map[string]string) (string, error) {
	sni := args["tls-sni-cert-key"]
	if args["enable-aggregator-routing"] != "true" || !strings.HasSuffix(sni, ":"+nodePodGateway) {
		return "", errors.New("the environment was not started with the API server flags of a node: set Options.APIServerArgs to NodeAPIServerArgs(dir)")
	}
	cert, _, _ := strings.Cut(sni, ",")
	return filepath.Dir(cert), nil
}

// checkPrerequisites reports what the machine lacks to run a node.
func (n *Node) checkPrerequisites() error {
	var missing []string
	for _, name := range []string{"kubelet", "kube-controller-manager", "kube-scheduler", NodePauseImageTarball} {
		if _, err := os.Stat(filepath.Join(n.env.BinDir, name)); err != nil {
			missing = append(missing, filepath.Join(n.env.BinDir, name))
		}
	}
	for _, name := range []string{"containerd", "containerd-shim-runc-v2", "ctr", "runc", "iptables", "ip", "umount"} {
		if _, err := exec.LookPath(name); err != nil {
			missing = append(missing, name)
		}
	}
	for _, plugin := range []string{"bridge", "host-local", "loopback", "portmap"} {
		if _, err := os.Stat(filepath.Join("/usr/lib/cni", plugin)); err != nil {
			missing = append(missing, "/usr/lib/cni/"+plugin)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("missing %s: run make node-tools", strings.Join(missing, ", "))
	}
	return nil
}

// acquireLock waits until no other process runs a node.
func (n *Node) acquireLock(ctx context.Context) error {
	f, err := os.OpenFile(nodeLockFile, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return fmt.Errorf("opening %s: %w", nodeLockFile, err)
	}
	deadline := time.Now().Add(nodeLockTimeout)
	logged := false
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			n.lock = f
			return nil
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) {
			_ = f.Close()
			return fmt.Errorf("locking %s: %w", nodeLockFile, err)
		}
		if !logged {
			n.env.logger.Info("another process runs a node; waiting for it to stop", "lock", nodeLockFile)
			logged = true
		}
		select {
		case <-ctx.Done():
			_ = f.Close()
			return fmt.Errorf("waiting for another process's node to stop (%s): %w", nodeLockFile, ctx.Err())
		case <-time.After(time.Second):
		}
		if time.Now().After(deadline) {
			_ = f.Close()
			return fmt.Errorf("another process has run a node for more than %s (%s is locked)", nodeLockTimeout, nodeLockFile)
		}
	}
}

// The node's files in Dir.
func (n *Node) path(name string) string { return filepath.Join(n.Dir, name) }

// writeFiles writes the configurations of containerd, the CNI network, the
// kubelet and its kubeconfig, and the CA bundle Pods trust.
func (n *Node) writeFiles(podsCADir string) error {
	apiServer := n.env.testEnv.ControlPlane.GetAPIServer()
	podsCA, err := os.ReadFile(filepath.Join(podsCADir, nodeAPIServerCAFile))
	if err != nil {
		return fmt.Errorf("reading the Pods' API server CA: %w", err)
	}
	// kube-root-ca.crt, which every Pod trusts: envtest's serving CA (the
	// API server at 127.0.0.1) and the node's CA (the Pods' view of it).
	rootCA := append(append(bytes.Clone(n.env.Config.CAData), '\n'), podsCA...)
	// The kubelet's client CAs: envtest's (its users, the admin) and the
	// node's (the API server's client certificate).
	envtestClientCA, err := os.ReadFile(filepath.Join(apiServer.CertDir, "client-cert-auth-ca.crt"))
	if err != nil {
		return fmt.Errorf("reading envtest's client CA: %w", err)
	}
	kubeletClientCA := append(append(envtestClientCA, '\n'), podsCA...)

	user, err := n.env.testEnv.AddUser(envtest.User{Name: "system:node:" + n.Name, Groups: []string{"system:nodes"}}, n.env.Config)
	if err != nil {
		return fmt.Errorf("making the kubelet's client certificate: %w", err)
	}
	kubeletKubeconfig, err := user.KubeConfig()
	if err != nil {
		return fmt.Errorf("writing the kubelet's kubeconfig: %w", err)
	}
	ports, err := freePorts(4)
	if err != nil {
		return err
	}
	n.kubeletPort, n.kubeletHealthzPort, n.kcmPort, n.schedulerPort = ports[0], ports[1], ports[2], ports[3]

	files := map[string][]byte{
		"containerd.toml":            []byte(n.containerdConfig()),
		"cni/net.d/10-node.conflist": []byte(n.cniConfig()),
		"kubelet.yaml":               []byte(n.kubeletConfig(n.path("kubelet-client-ca.crt"))),
		"kubelet-client-ca.crt":      kubeletClientCA,
		"kubelet.kubeconfig":         kubeletKubeconfig,
		"root-ca.crt":                rootCA,
	}
	for name, data := range files {
		path := n.path(name)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return err
		}
		if err := writeFileAtomically(path, data, 0o600); err != nil {
			return err
		}
	}
	return nil
}

// containerdConfig is containerd's configuration: its root (images,
// snapshots) in Dir, its state and socket in nodeStateDir, the CRI plugin
// with runc and cgroupfs, the sandbox image imported (never pulled), and the
// CNI network of Dir/cni/net.d. restrict_oom_score_adj keeps containers'
// oom_score_adj no lower than containerd's own, as a process without
// CAP_SYS_RESOURCE (a machine that runs tests in a sandbox) may not lower
// it: runc then fails to create the Pod's sandbox ("can't get final child's
// PID from pipe: EOF").
func (n *Node) containerdConfig() string {
	return fmt.Sprintf(`version = 2
root = %[1]q
state = %[2]q
disabled_plugins = ["io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.devmapper", "io.containerd.snapshotter.v1.zfs", "io.containerd.tracing.processor.v1.otlp", "io.containerd.internal.v1.tracing"]

[grpc]
  address = %[3]q

[ttrpc]
  address = %[4]q

[plugins."io.containerd.internal.v1.opt"]
  path = %[5]q

[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = %[6]q
  netns_mounts_under_state_dir = true
  disable_apparmor = true
  restrict_oom_score_adj = true
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
        Root = %[7]q
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = %[8]q
    max_conf_num = 1
`, n.path("containerd"), filepath.Join(nodeStateDir, "containerd"), n.socket, n.socket+".ttrpc",
		n.path("containerd/opt"), NodeSandboxImage, filepath.Join(nodeStateDir, "runc"), n.path("cni/net.d"))
}

// cniConfig is the Pods' network: a bridge that is their gateway (so the
// host has a route to NodePodCIDR), host-local addresses with their state in
// Dir, and portmap for hostPorts. containerd adds the loopback itself.
func (n *Node) cniConfig() string {
	return fmt.Sprintf(`{
  "cniVersion": "0.4.0",
  "name": %[5]q,
  "plugins": [
    {
      "type": "bridge",
      "bridge": %[1]q,
      "isGateway": true,
      "ipMasq": false,
      "hairpinMode": true,
      "ipam": {
        "type": "host-local",
        "ranges": [[{"subnet": %[2]q, "gateway": %[3]q}]],
        "routes": [{"dst": "0.0.0.0/0"}],
        "dataDir": %[4]q
      }
    },
    {"type": "portmap", "capabilities": {"portMappings": true}}
  ]
}
`, nodeBridge, NodePodCIDR, nodePodGateway, n.path("cni/ipam"), nodeNetworkName)
}

// kubeletConfig is the kubelet's configuration: cgroupfs (as containerd's
// runc), cgroup v1 allowed, containerd's socket, Pods' logs and plugins in
// Dir, authentication of callers by client certificates of the
// environment's client CA or the node's (the API server's) or by bearer
// tokens, authorization by the API
// server, its own oom_score_adj left as it is (see containerdConfig), and
// eviction and image garbage collection out of the way of a
// test machine's disk.
func (n *Node) kubeletConfig(clientCAFile string) string {
	return fmt.Sprintf(`apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
failCgroupV1: false
cgroupDriver: cgroupfs
cgroupRoot: %[1]s
containerRuntimeEndpoint: unix://%[2]s
imageServiceEndpoint: unix://%[2]s
podLogsDir: %[3]s
volumePluginDir: %[4]s
port: %[5]d
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: %[6]d
authentication:
  anonymous:
    enabled: false
  webhook:
    enabled: true
  x509:
    clientCAFile: %[7]s
authorization:
  mode: Webhook
failSwapOn: false
oomScoreAdj: 0
evictionHard:
  memory.available: 50Mi
  nodefs.available: 1%%
  nodefs.inodesFree: 1%%
  imagefs.available: 1%%
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
serializeImagePulls: false
syncFrequency: 10s
fileCheckFrequency: 10s
nodeStatusUpdateFrequency: 5s
`, nodeCgroupRoot, n.socket, n.path("pod-logs"), n.path("volume-plugins"), n.kubeletPort, n.kubeletHealthzPort, clientCAFile)
}

// makeCgroupRoot creates nodeCgroupRoot in every cgroup hierarchy, as the
// kubelet wants it to exist, with the cpus and memory nodes of cpuset's root.
func (n *Node) makeCgroupRoot() error {
	if isCgroup2() {
		return os.MkdirAll(filepath.Join("/sys/fs/cgroup", nodeCgroupRoot), 0o755)
	}
	entries, err := os.ReadDir("/sys/fs/cgroup")
	if err != nil {
		return fmt.Errorf("listing the cgroup hierarchies: %w", err)
	}
	for _, e := range entries {
		hierarchy := filepath.Join("/sys/fs/cgroup", e.Name())
		if info, err := os.Lstat(hierarchy); err != nil || !info.IsDir() {
			continue // cpu,cpuacct links to its hierarchy
		}
		dir := filepath.Join(hierarchy, nodeCgroupRoot)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return fmt.Errorf("creating the node's cgroup %s: %w", dir, err)
		}
		if e.Name() != "cpuset" {
			continue
		}
		for _, file := range []string{"cpuset.cpus", "cpuset.mems"} {
			if cur, _ := os.ReadFile(filepath.Join(dir, file)); len(bytes.TrimSpace(cur)) > 0 {
				continue
			}
			parent, err := os.ReadFile(filepath.Join(hierarchy, file))
			if err != nil {
				return fmt.Errorf("reading %s: %w", file, err)
			}
			if err := os.WriteFile(filepath.Join(dir, file), parent, 0o644); err != nil {
				return fmt.Errorf("writing %s of the node's cgroup: %w", file, err)
			}
		}
	}
	return nil
}

// isCgroup2 reports whether /sys/fs/cgroup is the unified hierarchy.
func isCgroup2() bool {
	_, err := os.Stat("/sys/fs/cgroup/cgroup.controllers")
	return err == nil
}

// startProcess starts a component with its output in Dir/<name>.log.
func (n *Node) startProcess(name, path string, args ...string) (*nodeProcess, error) {
	logFile, err := os.Create(n.path(name + ".log"))
	if err != nil {
		return nil, fmt.Errorf("creating %s.log: %w", name, err)
	}
	p := &nodeProcess{name: name, log: logFile, tail: newTailWriter(30), done: make(chan struct{})}
	p.cmd = exec.Command(path, args...)
	p.cmd.Dir = n.Dir
	p.cmd.Stdout, p.cmd.Stderr = io.MultiWriter(logFile, p.tail), io.MultiWriter(logFile, p.tail)
	p.cmd.SysProcAttr = childProcAttr()
	if err := p.cmd.Start(); err != nil {
		_ = logFile.Close()
		return nil, fmt.Errorf("starting %s: %w", name, err)
	}
	go func() {
		p.exitErr = p.cmd.Wait()
		close(p.done)
	}()
	n.procs = append(n.procs, p)
	n.byName[name] = p
	n.env.logger.Info("node component started", "name", name, "pid", p.cmd.Process.Pid)
	return p, nil
}

// waitProcess polls ready until it returns nil, the process exits, ctx ends
// or timeout passes; errors end with the process's last lines.
func waitProcess(ctx context.Context, p *nodeProcess, timeout time.Duration, what string, ready func(context.Context) error) error {
	deadline := time.Now().Add(timeout)
	for {
		err := ready(ctx)
		if err == nil {
			return nil
		}
		fail := func(format string, args ...any) error {
			return fmt.Errorf("%s: %s (last error: %v)\nlast lines of %s.log:\n%s", what, fmt.Sprintf(format, args...), err, p.name, p.tail.String())
		}
		select {
		case <-p.done:
			return fail("%s exited: %v", p.name, p.exitErr)
		case <-ctx.Done():
			return fail("%v", ctx.Err())
		case <-time.After(250 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fail("not within %s", timeout)
		}
	}
}

// startContainerd starts containerd and waits for its socket.
func (n *Node) startContainerd(ctx context.Context) error {
	p, err := n.startProcess("containerd", "containerd", "--config", n.path("containerd.toml"))
	if err != nil {
		return err
	}
	return waitProcess(ctx, p, nodeComponentTimeout, "waiting for containerd", func(ctx context.Context) error {
		_, err := n.ctr(ctx, "version")
		return err
	})
}

// ctr runs containerd's ctr against the node's containerd in the CRI's
// namespace (k8s.io).
func (n *Node) ctr(ctx context.Context, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, "ctr", append([]string{"--address", n.socket, "--namespace", "k8s.io"}, args...)...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return out, fmt.Errorf("ctr %s: %w: %s", strings.Join(args, " "), err, bytes.TrimSpace(out))
	}
	return out, nil
}

// ImportImage imports an image tarball (docker save or OCI archive) into
// the node's containerd, where the kubelet finds it: a Pod that names it
// with imagePullPolicy Never or IfNotPresent runs it without a registry.
func (n *Node) ImportImage(ctx context.Context, tarball string) error {
	if _, err := os.Stat(tarball); err != nil {
		return fmt.Errorf("importing an image: %w", err)
	}
	begin := time.Now()
	out, err := n.ctr(ctx, "images", "import", "--snapshotter", "overlayfs", tarball)
	if err != nil {
		return fmt.Errorf("importing %s: %w", tarball, err)
	}
	n.env.logger.Info("image imported", "tarball", tarball, "after", time.Since(begin).Round(time.Millisecond).String(), "ctr", strings.TrimSpace(string(out)))
	return nil
}

// Ctr runs containerd's ctr with args against the node's containerd, in
// the namespace the kubelet uses, and returns its output.
func (n *Node) Ctr(ctx context.Context, args ...string) ([]byte, error) { return n.ctr(ctx, args...) }

// ContainerdAddress returns the socket of the node's containerd: set
// CONTAINERD_ADDRESS to it, and ctr, as a user runs it on a node, talks to
// this containerd.
func (n *Node) ContainerdAddress() string { return n.socket }

// Images returns the references of the images in the node's containerd.
func (n *Node) Images(ctx context.Context) ([]string, error) {
	out, err := n.ctr(ctx, "images", "list", "--quiet")
	if err != nil {
		return nil, err
	}
	return strings.Fields(string(out)), nil
}

// startControllers starts kube-controller-manager and kube-scheduler, as
// the admin, and waits for their /healthz.
func (n *Node) startControllers(ctx context.Context) error {
	apiServer := n.env.testEnv.ControlPlane.GetAPIServer()
	kubeconfig := n.env.Kubeconfig
	common := func(port int, certDir string) []string {
		return []string{
			"--kubeconfig", kubeconfig,
			"--authentication-kubeconfig", kubeconfig,
			"--authorization-kubeconfig", kubeconfig,
			"--bind-address", localHost,
			"--secure-port", strconv.Itoa(port),
			"--cert-dir", certDir,
			"--leader-elect=false",
		}
	}
	kcm, err := n.startProcess("kube-controller-manager", filepath.Join(n.env.BinDir, "kube-controller-manager"),
		append(common(n.kcmPort, n.path("kube-controller-manager")),
			"--root-ca-file", n.path("root-ca.crt"),
			"--service-account-private-key-file", filepath.Join(apiServer.CertDir, "sa-signer.key"),
			"--controllers=*",
			"--concurrent-deployment-syncs=2",
			"--node-monitor-period=2s",
		)...)
	if err != nil {
		return err
	}
	scheduler, err := n.startProcess("kube-scheduler", filepath.Join(n.env.BinDir, "kube-scheduler"),
		common(n.schedulerPort, n.path("kube-scheduler"))...)
	if err != nil {
		return err
	}
	if err := waitProcess(ctx, kcm, nodeComponentTimeout, "waiting for kube-controller-manager", healthz(n.kcmPort)); err != nil {
		return err
	}
	return waitProcess(ctx, scheduler, nodeComponentTimeout, "waiting for kube-scheduler", healthz(n.schedulerPort))
}

// healthz returns a check of https://127.0.0.1:port/healthz (a self-signed
// certificate).
func healthz(port int) func(context.Context) error {
	httpClient := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // a local component's self-signed certificate
	}}
	url := "https://" + net.JoinHostPort(localHost, strconv.Itoa(port)) + "/healthz"
	return func(ctx context.Context) error {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return err
		}
		resp, err := httpClient.Do(req)
		if err != nil {
			return err
		}
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 1024))
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("%s: %s: %s", url, resp.Status, bytes.TrimSpace(body))
		}
		return nil
	}
}

// routeKubernetesService stands in for kube-proxy for the kubernetes
// Service: what Pods send to its ClusterIP:443 goes to kube-apiserver's
// port on the Pods' gateway, where it serves the certificate of
// NodeAPIServerArgs.
func (n *Node) routeKubernetesService(ctx context.Context) error {
	host, err := url.Parse(n.env.Config.Host)
	if err != nil {
		return fmt.Errorf("parsing the API server's address: %w", err)
	}
	var svc corev1.Service
	if err := n.env.Client.Get(ctx, client.ObjectKey{Namespace: "default", Name: "kubernetes"}, &svc); err != nil {
		return fmt.Errorf("reading the kubernetes Service: %w", err)
	}
	if svc.Spec.ClusterIP != kubernetesServiceIP {
		return fmt.Errorf("the kubernetes Service's ClusterIP is %s, not %s, which the Pods' API server certificate names", svc.Spec.ClusterIP, kubernetesServiceIP)
	}
	rules := [][]string{
		{"-t", "nat", "-N", nodeNATChain},
		{"-t", "nat", "-A", nodeNATChain, "-d", kubernetesServiceIP + "/32", "-p", "tcp", "--dport", "443",
			"-j", "DNAT", "--to-destination", net.JoinHostPort(nodePodGateway, host.Port())},
		{"-t", "nat", "-I", "PREROUTING", "-i", nodeBridge, "-j", nodeNATChain},
	}
	for _, rule := range rules {
		if out, err := exec.CommandContext(ctx, "iptables", append([]string{"-w"}, rule...)...).CombinedOutput(); err != nil {
			return fmt.Errorf("iptables %s: %w: %s", strings.Join(rule, " "), err, bytes.TrimSpace(out))
		}
	}
	return nil
}

// startKubelet starts the kubelet and waits for the Node to be Ready.
func (n *Node) startKubelet(ctx context.Context) error {
	p, err := n.startProcess("kubelet", filepath.Join(n.env.BinDir, "kubelet"),
		"--config", n.path("kubelet.yaml"),
		"--kubeconfig", n.path("kubelet.kubeconfig"),
		"--root-dir", n.path("kubelet"),
		"--cert-dir", n.path("kubelet/pki"),
		"--hostname-override", n.Name,
		"--v=2",
	)
	if err != nil {
		return err
	}
	return waitProcess(ctx, p, nodeReadyTimeout, "waiting for the Node to be Ready", func(ctx context.Context) error {
		var node corev1.Node
		if err := n.env.Client.Get(ctx, client.ObjectKey{Name: n.Name}, &node); err != nil {
			return err
		}
		for _, c := range node.Status.Conditions {
			if c.Type == corev1.NodeReady {
				if c.Status == corev1.ConditionTrue {
					return nil
				}
				return fmt.Errorf("node %s: Ready=%s: %s: %s", n.Name, c.Status, c.Reason, c.Message)
			}
		}
		return fmt.Errorf("node %s has no Ready condition yet", n.Name)
	})
}

// LogTail returns the last lines a component (containerd, kubelet,
// kube-controller-manager, kube-scheduler) wrote, for a test's failure
// message; its whole log is Dir/<component>.log.
func (n *Node) LogTail(component string) string {
	if p := n.byName[component]; p != nil {
		return p.tail.String()
	}
	return ""
}

// Stop stops the kubelet, the controllers and containerd, kills every
// container of the node, unmounts what they mounted and removes the Pods'
// network (bridge, iptables chain) and containerd's state; Dir and its logs
// stay (with the Environment's WorkDir). It is idempotent.
func (n *Node) Stop() error {
	n.stopOnce.Do(func() { n.stopErr = n.stop() })
	return n.stopErr
}

func (n *Node) stop() error {
	var errs []error
	// The kubelet first, so that it restarts nothing; containerd last.
	for i := len(n.procs) - 1; i >= 0; i-- {
		p := n.procs[i]
		if err := stopNodeProcess(p); err != nil {
			errs = append(errs, err)
		}
		_ = p.log.Close()
	}
	if n.lock != nil {
		ctx, cancel := context.WithTimeout(context.Background(), nodeCleanupTimeout)
		if err := n.cleanup(ctx); err != nil {
			errs = append(errs, err)
		}
		cancel()
	}
	if n.watcher != nil {
		_ = n.watcher.Process.Kill()
		_ = n.watcher.Wait()
	}
	if n.lock != nil {
		_ = n.lock.Close() // releases the flock
	}
	if n.env != nil && n.env.logger.GetSink() != nil {
		n.env.logger.Info("node stopped", "name", n.Name, "errors", len(errs))
	}
	return errors.Join(errs...)
}

// stopNodeProcess sends SIGTERM to a component's process group, SIGKILL
// after nodeStopTimeout, and waits for it.
func stopNodeProcess(p *nodeProcess) error {
	pid := p.cmd.Process.Pid
	if !p.exited() {
		killGroup(pid, syscall.SIGTERM)
		select {
		case <-p.done:
		case <-time.After(nodeStopTimeout):
			killGroup(pid, syscall.SIGKILL)
			<-p.done
		}
	}
	killGroup(pid, syscall.SIGKILL) // anything it left behind in its group
	return nil
}

// nodeCleanupScript removes what a node leaves on the machine: with "now"
// as $1 at once, else once the process $1 has ended (the watchdog of a test
// process that may be killed). It kills the node's components (by their
// binaries, with Dir or containerd's state directory in their command
// line) and containerd's shims, then every process in the node's cgroups
// (the containers), unmounts everything under Dir and the state directory,
// removes the node's links in /var/log/containers, its iptables chain, its
// bridge, the CNI results libcni cached for its Pods (no CNI DEL ran for
// containers killed so), its cgroups and the state directory.
const nodeCleanupScript = `
running() { case "$(sed 's/.*) //' "/proc/$1/stat" 2>/dev/null | cut -c1)" in ''|Z|X) return 1;; esac; }
if [ "$1" != now ]; then while running "$1"; do sleep 1; done; fi
self=$$
for i in 1 2 3 4 5 6 7 8 9 10; do
	found=
	for p in /proc/[0-9]*; do
		pid=${p#/proc/}
		[ "$pid" = "$self" ] && continue
		cmd=$(tr '\0' ' ' < "$p/cmdline" 2>/dev/null) || continue
		case "${cmd%% *}" in
		*/containerd|containerd|*/containerd-shim-runc-v2|containerd-shim-runc-v2|*/kubelet|*/kube-controller-manager|*/kube-scheduler) ;;
		*) continue;;
		esac
		case "$cmd" in *"$NODE_DIR"*|*"$STATE_DIR"*) kill -KILL "$pid" 2>/dev/null && found=1;; esac
	done
	for procs in $(find /sys/fs/cgroup -path "*$CGROUP_ROOT/*" -name cgroup.procs 2>/dev/null); do
		for pid in $(cat "$procs" 2>/dev/null); do kill -KILL "$pid" 2>/dev/null && found=1; done
	done
	[ -z "$found" ] && break
	sleep 1
done
awk '{print $5}' /proc/self/mountinfo | while read -r m; do
	case "$m" in "$NODE_DIR"/*|"$STATE_DIR"|"$STATE_DIR"/*) echo "$m";; esac
done | sort -r | while read -r m; do umount -l "$m" 2>/dev/null; done
for l in /var/log/containers/*; do
	case "$(readlink "$l" 2>/dev/null)" in "$NODE_DIR"/*) rm -f "$l";; esac
done
while iptables -w -t nat -D PREROUTING -i "$BRIDGE" -j "$CHAIN" 2>/dev/null; do :; done
iptables -w -t nat -F "$CHAIN" 2>/dev/null
iptables -w -t nat -X "$CHAIN" 2>/dev/null
ip link del "$BRIDGE" 2>/dev/null
for f in /var/lib/cni/results/"$NETWORK"-*-eth0; do
	[ -e "$f" ] || continue
	id=${f#/var/lib/cni/results/"$NETWORK"-}; id=${id%-eth0}
	rm -f "$f" "/var/lib/cni/results/cni-loopback-$id-lo"
done
find /sys/fs/cgroup -depth -type d \( -path "*$CGROUP_ROOT" -o -path "*$CGROUP_ROOT/*" \) -exec rmdir {} \; 2>/dev/null
rm -rf "$STATE_DIR"
exit 0
`

// cleanupCommand is nodeCleanupScript for mode ("now" or a pid to wait for).
func (n *Node) cleanupCommand(mode string) *exec.Cmd {
	cmd := exec.Command("sh", "-c", nodeCleanupScript, "node-cleanup", mode)
	cmd.Env = append(os.Environ(), "NODE_DIR="+n.Dir, "STATE_DIR="+nodeStateDir, "CGROUP_ROOT="+nodeCgroupRoot,
		"BRIDGE="+nodeBridge, "CHAIN="+nodeNATChain, "NETWORK="+nodeNetworkName)
	return cmd
}

// cleanup runs nodeCleanupScript now.
func (n *Node) cleanup(ctx context.Context) error {
	cmd := n.cleanupCommand("now")
	done := make(chan error, 1)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("cleaning up the node: %w", err)
	}
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			return fmt.Errorf("cleaning up the node: %w: %s", err, bytes.TrimSpace(out.Bytes()))
		}
		return nil
	case <-ctx.Done():
		_ = cmd.Process.Kill()
		<-done
		return fmt.Errorf("cleaning up the node: %w", ctx.Err())
	}
}

// startWatcher starts nodeCleanupScript as the watchdog of this process, in
// a process group of its own (see reaperScript): containerd's shims and
// the containers are not this process's children and would outlive it.
func (n *Node) startWatcher() error {
	cmd := n.cleanupCommand(strconv.Itoa(os.Getpid()))
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("starting the node's watchdog: %w", err)
	}
	n.watcher = cmd
	return nil
}
