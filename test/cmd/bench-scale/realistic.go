package main

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"

	bootstrapv1 "sigs.k8s.io/cluster-api/api/bootstrap/kubeadm/v1beta2"
)

// The objects of a realistic world are shaped as a management cluster
// holds them once Cluster API's controllers have run: the guard's caches
// receive every byte of them over its watches before its transforms drop
// what it does not read, so bare objects would understate its memory and
// its boot work.
//
// kubeadmConfigSpecJSON is a KubeadmControlPlane's kubeadmConfigSpec:
// clusterConfiguration, initConfiguration and joinConfiguration as Cluster
// API's quick start has them (v1.14.2,
// test/infrastructure/docker/templates/clusterclass-quick-start.yaml:
// certSANs, the eviction-hard kubelet argument) with the etcd, DNS and
// image-repository settings its variables patch in; files and commands as
// a cloud provider's quick start adds them (CAPD's has none): a kube-vip
// static pod for the control-plane endpoint, and pre/post kubeadm
// commands. CLUSTER stands for the cluster's name.
const kubeadmConfigSpecJSON = `{
  "clusterConfiguration": {
    "imageRepository": "registry.k8s.io",
    "etcd": {"local": {"imageTag": "3.6.4-0", "dataDir": "/var/lib/etcddisk/etcd",
      "extraArgs": [{"name": "quota-backend-bytes", "value": "8589934592"}]}},
    "dns": {"imageRepository": "registry.k8s.io/coredns", "imageTag": "v1.12.1"},
    "apiServer": {
      "certSANs": ["localhost", "127.0.0.1", "0.0.0.0", "host.docker.internal"],
      "extraArgs": [{"name": "cloud-provider", "value": "external"}, {"name": "audit-log-maxage", "value": "30"},
        {"name": "profiling", "value": "false"}]
    },
    "controllerManager": {"extraArgs": [{"name": "cloud-provider", "value": "external"},
      {"name": "bind-address", "value": "0.0.0.0"}, {"name": "profiling", "value": "false"}]},
    "scheduler": {"extraArgs": [{"name": "bind-address", "value": "0.0.0.0"}, {"name": "profiling", "value": "false"}]}
  },
  "initConfiguration": {
    "nodeRegistration": {
      "criSocket": "unix:///var/run/containerd/containerd.sock",
      "kubeletExtraArgs": [{"name": "eviction-hard", "value": "nodefs.available<0%,nodefs.inodesFree<0%,imagefs.available<0%"},
        {"name": "cloud-provider", "value": "external"}],
      "name": "{{ ds.meta_data.hostname }}"
    }
  },
  "joinConfiguration": {
    "nodeRegistration": {
      "criSocket": "unix:///var/run/containerd/containerd.sock",
      "kubeletExtraArgs": [{"name": "eviction-hard", "value": "nodefs.available<0%,nodefs.inodesFree<0%,imagefs.available<0%"},
        {"name": "cloud-provider", "value": "external"}],
      "name": "{{ ds.meta_data.hostname }}"
    }
  },
  "files": [
    {"path": "/etc/kubernetes/manifests/kube-vip.yaml", "owner": "root:root", "permissions": "0644",
     "content": "apiVersion: v1\nkind: Pod\nmetadata:\n  name: kube-vip\n  namespace: kube-system\nspec:\n  containers:\n  - name: kube-vip\n    image: ghcr.io/kube-vip/kube-vip:v0.8.9\n    imagePullPolicy: IfNotPresent\n    args:\n    - manager\n    env:\n    - name: vip_arp\n      value: \"true\"\n    - name: port\n      value: \"6443\"\n    - name: vip_interface\n      value: \"\"\n    - name: vip_cidr\n      value: \"32\"\n    - name: cp_enable\n      value: \"true\"\n    - name: cp_namespace\n      value: kube-system\n    - name: vip_ddns\n      value: \"false\"\n    - name: svc_enable\n      value: \"false\"\n    - name: vip_leaderelection\n      value: \"true\"\n    - name: vip_leasename\n      value: plndr-cp-lock\n    - name: vip_leaseduration\n      value: \"15\"\n    - name: vip_renewdeadline\n      value: \"10\"\n    - name: vip_retryperiod\n      value: \"2\"\n    - name: address\n      value: CLUSTER.example.internal\n    securityContext:\n      capabilities:\n        add:\n        - NET_ADMIN\n        - NET_RAW\n    volumeMounts:\n    - mountPath: /etc/kubernetes/admin.conf\n      name: kubeconfig\n  hostAliases:\n  - hostnames:\n    - kubernetes\n    ip: 127.0.0.1\n  hostNetwork: true\n  volumes:\n  - hostPath:\n      path: /etc/kubernetes/admin.conf\n      type: FileOrCreate\n    name: kubeconfig\n"},
    {"path": "/etc/sysctl.d/99-kubernetes.conf", "owner": "root:root", "permissions": "0644",
     "content": "net.ipv4.ip_forward = 1\nnet.bridge.bridge-nf-call-iptables = 1\nfs.inotify.max_user_instances = 8192\n"}
  ],
  "preKubeadmCommands": [
    "hostnamectl set-hostname \"{{ ds.meta_data.hostname }}\"",
    "echo \"::1         ipv6-localhost ipv6-loopback localhost6 localhost6.localdomain6\" >/etc/hosts",
    "echo \"127.0.0.1   {{ ds.meta_data.hostname }} {{ local_hostname }} localhost localhost.localdomain localhost4 localhost4.localdomain4\" >>/etc/hosts",
    "sysctl --system"
  ],
  "postKubeadmCommands": ["echo CLUSTER control plane node ready"]
}`

// kubeadmConfigSpec returns the kubeadmConfigSpec of cluster's control
// plane.
func kubeadmConfigSpec(cluster string) (bootstrapv1.KubeadmConfigSpec, error) {
	var spec bootstrapv1.KubeadmConfigSpec
	if err := json.Unmarshal([]byte(strings.ReplaceAll(kubeadmConfigSpecJSON, "CLUSTER", cluster)), &spec); err != nil {
		return spec, fmt.Errorf("decoding the kubeadmConfigSpec: %w", err)
	}
	return spec, nil
}

// statusAt is when every status of the world says its conditions last
// changed.
var statusAt = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC).Format(time.RFC3339)

// condition is a metav1.Condition as a controller writes it.
func condition(typ, status, reason, message string, generation int64) map[string]any {
	// message is required by the schema, empty or not.
	return map[string]any{"type": typ, "status": status, "reason": reason, "message": message, "observedGeneration": generation, "lastTransitionTime": statusAt}
}

// v1beta1Condition is a condition of the deprecated v1beta1 status, which
// Cluster API's controllers still write beside the v1beta2 one.
func v1beta1Condition(typ string) map[string]any {
	return map[string]any{"type": typ, "status": "True", "lastTransitionTime": statusAt}
}

// kcpStatus is a KubeadmControlPlane's status as its controller writes it
// once replicas machines run version: the v1beta2 conditions, counters and
// versions, and the deprecated v1beta1 block.
func kcpStatus(cluster string, replicas int32, version string, generation int64) map[string]any {
	var conds []any
	for _, c := range [][3]string{
		{"Available", "True", "Available"}, {"CertificatesAvailable", "True", "Available"}, {"Initialized", "True", "Initialized"},
		{"EtcdClusterHealthy", "True", "Healthy"}, {"ControlPlaneComponentsHealthy", "True", "Healthy"},
		{"MachinesReady", "True", "Ready"}, {"MachinesUpToDate", "True", "UpToDate"}, {"RollingOut", "False", "NotRollingOut"},
		{"ScalingUp", "False", "NotScalingUp"}, {"ScalingDown", "False", "NotScalingDown"}, {"Remediating", "False", "NotRemediating"},
		{"Deleting", "False", "NotDeleting"}, {"Paused", "False", "NotPaused"},
	} {
		conds = append(conds, condition(c[0], c[1], c[2], "", generation))
	}
	var old []any
	for _, t := range []string{"Ready", "Available", "CertificatesAvailable", "MachinesCreated", "MachinesReady", "Resized",
		"ControlPlaneComponentsHealthy", "EtcdClusterHealthy"} {
		old = append(old, v1beta1Condition(t))
	}
	return map[string]any{"status": map[string]any{
		"conditions":         conds,
		"initialization":     map[string]any{"controlPlaneInitialized": true},
		"selector":           "cluster.x-k8s.io/cluster-name=" + cluster + ",cluster.x-k8s.io/control-plane",
		"replicas":           replicas,
		"readyReplicas":      replicas,
		"availableReplicas":  replicas,
		"upToDateReplicas":   replicas,
		"version":            version,
		"versions":           []any{map[string]any{"version": version, "replicas": replicas}},
		"observedGeneration": generation,
		"deprecated": map[string]any{"v1beta1": map[string]any{
			"conditions": old, "updatedReplicas": replicas, "readyReplicas": replicas, "unavailableReplicas": 0,
		}},
	}}
}

// mdStatus is a MachineDeployment's status as its controller writes it
// once replicas machines run.
func mdStatus(pool, version string, replicas int32, generation int64) map[string]any {
	var conds []any
	for _, c := range [][3]string{
		{"Available", "True", "Available"}, {"MachinesReady", "True", "Ready"}, {"MachinesUpToDate", "True", "UpToDate"},
		{"RollingOut", "False", "NotRollingOut"}, {"ScalingUp", "False", "NotScalingUp"}, {"ScalingDown", "False", "NotScalingDown"},
		{"Remediating", "False", "NotRemediating"}, {"Deleting", "False", "NotDeleting"}, {"Paused", "False", "NotPaused"},
	} {
		conds = append(conds, condition(c[0], c[1], c[2], "", generation))
	}
	return map[string]any{"status": map[string]any{
		"conditions":         conds,
		"selector":           "pool=" + pool,
		"replicas":           replicas,
		"readyReplicas":      replicas,
		"availableReplicas":  replicas,
		"upToDateReplicas":   replicas,
		"versions":           []any{map[string]any{"version": version, "replicas": replicas}},
		"phase":              "Running",
		"observedGeneration": generation,
		"deprecated": map[string]any{"v1beta1": map[string]any{
			"conditions":      []any{v1beta1Condition("Ready"), v1beta1Condition("Available"), v1beta1Condition("MachineSetReady")},
			"updatedReplicas": replicas, "readyReplicas": replicas, "availableReplicas": replicas, "unavailableReplicas": 0,
		}},
	}}
}

// machineStatus is a running Machine's status: its node, the node's
// system info (the guard reads the kubelet version), addresses and the
// conditions the Machine controller and, for a control-plane machine, the
// KubeadmControlPlane controller write.
func machineStatus(name, version string, controlPlane bool, n int) map[string]any {
	var conds []any
	for _, c := range [][3]string{
		{"Available", "True", "Available"}, {"Ready", "True", "Ready"}, {"UpToDate", "True", "UpToDate"},
		{"BootstrapConfigReady", "True", "Ready"}, {"InfrastructureReady", "True", "Ready"}, {"NodeReady", "True", "NodeReady"},
		{"NodeHealthy", "True", "NodeHealthy"}, {"Deleting", "False", "NotDeleting"}, {"Paused", "False", "NotPaused"},
	} {
		conds = append(conds, condition(c[0], c[1], c[2], "", 1))
	}
	old := []any{v1beta1Condition("Ready"), v1beta1Condition("BootstrapReady"), v1beta1Condition("InfrastructureReady"),
		v1beta1Condition("NodeHealthy")}
	if controlPlane {
		for _, t := range []string{"APIServerPodHealthy", "ControllerManagerPodHealthy", "SchedulerPodHealthy", "EtcdPodHealthy", "EtcdMemberHealthy"} {
			conds = append(conds, condition(t, "True", "Running", "", 1))
			old = append(old, v1beta1Condition(t))
		}
	}
	ip := fmt.Sprintf("10.%d.%d.%d", (n>>16)&0xff, (n>>8)&0xff, n&0xff)
	st := map[string]any{
		"conditions":     conds,
		"nodeRef":        map[string]any{"name": name},
		"initialization": map[string]any{"infrastructureProvisioned": true, "bootstrapDataSecretCreated": true},
		"addresses": []any{
			map[string]any{"type": "InternalIP", "address": ip},
			map[string]any{"type": "Hostname", "address": name},
			map[string]any{"type": "InternalDNS", "address": name + ".example.internal"},
		},
		"phase":              "Running",
		"lastUpdated":        statusAt,
		"observedGeneration": 1,
		"nodeInfo": map[string]any{
			"machineID": fmt.Sprintf("%032x", n), "systemUUID": fmt.Sprintf("%08x-0000-4000-8000-%012x", n, n), "bootID": fmt.Sprintf("%08x-1111-4000-8000-%012x", n, n),
			"kernelVersion": "6.8.0-1015-generic", "osImage": "Ubuntu 24.04.1 LTS", "containerRuntimeVersion": "containerd://2.0.2",
			"kubeletVersion": version, "kubeProxyVersion": version, "operatingSystem": "linux", "architecture": "amd64",
		},
		"deprecated": map[string]any{"v1beta1": map[string]any{"conditions": old}},
	}
	if controlPlane {
		st["certificatesExpiryDate"] = "2027-11-30T12:00:00Z"
	}
	return map[string]any{"status": st}
}
