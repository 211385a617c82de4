package install

import (
	"fmt"
	"maps"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// The NetworkPolicy component, and the overlay docs/install-access.md shows for it
// (testdata/networkpolicy/kustomization.yaml, quoted there as it is).
const (
	networkPolicyComponent = "config/networkpolicy"
	networkPolicyName      = "rollout-guard-controller-manager"
	networkPolicyOverlay   = "testdata/networkpolicy/kustomization.yaml"
	// The component's stand-in for the API server's source, which the
	// overlay replaces.
	networkPolicyPlaceholder = "CONTROL-PLANE-NODE-CIDR"
)

// The flags that set the guard's listening ports, by the server they belong to.
var guardPortFlags = map[string]string{
	"webhook": "--webhook-port",
	"metrics": "--metrics-bind-address",
	"health":  "--health-probe-bind-address",
}

// TestNetworkPolicyComponent builds the overlay of docs/install-access.md —
// config/default plus config/networkpolicy, with the API server's source and
// Prometheus's namespace patched in — and checks the one NetworkPolicy it
// adds against the Deployment it builds: it selects the guard's pods, admits
// ingress only, and exactly to the ports the guard's servers listen on, the
// webhook from the given CIDRs, the metrics from the monitoring namespace,
// the health probes from anywhere. The API server accepts all of it.
func TestNetworkPolicyComponent(t *testing.T) {
	m := buildNetworkPolicyOverlay(t, copyConfig(t), true)
	assert.Empty(t, networkPolicyProblems(m))

	// The component adds the policy and changes nothing else.
	def := build(t, "config/default")
	assert.Equal(t, slices.Sorted(slices.Values(append(def.ids(), "NetworkPolicy/"+networkPolicyName))), m.ids())
	for _, u := range def {
		assert.Equal(t, u.Object, m.find(t, u.GetKind(), u.GetName()).Object, "%s %s", u.GetKind(), u.GetName())
	}

	// The overlay's patches reached the rules docs/install-access.md says they do.
	np := as[networkingv1.NetworkPolicy](t, m.find(t, "NetworkPolicy", networkPolicyName))
	assert.Equal(t, "rollout-guard", np.Labels["app.kubernetes.io/part-of"])
	require.Len(t, np.Spec.Ingress, 3)
	assert.Equal(t, []networkingv1.NetworkPolicyPeer{
		{IPBlock: &networkingv1.IPBlock{CIDR: "192.0.2.0/24"}},
		{IPBlock: &networkingv1.IPBlock{CIDR: "2001:db8::/64"}},
	}, np.Spec.Ingress[0].From)
	assert.Equal(t, []networkingv1.NetworkPolicyPeer{
		{NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{corev1.LabelMetadataName: "prometheus"}}},
	}, np.Spec.Ingress[1].From)

	applyDryRun(t, m)
}

// TestNetworkPolicyIsOptIn: neither shipped installation makes a
// NetworkPolicy; only an overlay that lists the component does.
func TestNetworkPolicyIsOptIn(t *testing.T) {
	assert.Empty(t, build(t, "config/default").ofKind("NetworkPolicy"))
	withoutCertManager, _, _ := buildWithoutCertManager(t)
	assert.Empty(t, withoutCertManager.ofKind("NetworkPolicy"))
}

// TestNetworkPolicyPlaceholderIsRefused: the component with the API server's
// source left as shipped builds, and the API server refuses the policy
// (naming the field), so an overlay that forgets to set it fails to apply
// instead of cutting the API server off from the guard. It also shows that
// the dry runs above are checked against the schema.
func TestNetworkPolicyPlaceholderIsRefused(t *testing.T) {
	m := buildNetworkPolicyOverlay(t, copyConfig(t), false)
	np := m.find(t, "NetworkPolicy", networkPolicyName).DeepCopy()
	applyDryRun(t, manifest{m.find(t, "Namespace", namespace)})
	c, _ := recordingClient(t)
	err := c.Apply(t.Context(), client.ApplyConfigurationFromUnstructured(np), client.FieldOwner(fieldOwner), client.ForceOwnership, client.DryRunAll)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "spec.ingress[0].from[0].ipBlock.cidr")
	assert.Contains(t, err.Error(), networkPolicyPlaceholder)
}

// TestNetworkPolicyFollowsTheDeployment: the checks of
// TestNetworkPolicyComponent fail when config/manager changes under the
// component — a port moved, the pods relabelled — each with a message that
// says what no longer matches.
func TestNetworkPolicyFollowsTheDeployment(t *testing.T) {
	for _, tc := range []struct {
		name string
		// replacements in config/manager/manager.yaml, old → new, each
		// made everywhere
		edits []string
		want  []string
	}{{
		name:  "webhook port moved",
		edits: []string{"--webhook-port=9443", "--webhook-port=9444", "containerPort: 9443", "containerPort: 9444"},
		want: []string{
			"the webhook server's port 9444 (--webhook-port) is not admitted",
			"ingress rule 0: port 9443 is no port of the guard's container",
		},
	}, {
		name:  "metrics port moved in the flag only",
		edits: []string{"--metrics-bind-address=:8443", "--metrics-bind-address=:8444"},
		want: []string{
			"the metrics server listens on 8444 (--metrics-bind-address) but the container declares no such port",
			"the metrics server's port 8444 (--metrics-bind-address) is not admitted",
		},
	}, {
		name:  "pods relabelled",
		edits: []string{"app.kubernetes.io/component: webhook", "app.kubernetes.io/component: guard"},
		want:  []string{"does not select the guard's pods"},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			config := copyConfig(t)
			manager := filepath.Join(config, "manager", "manager.yaml")
			data, err := os.ReadFile(manager)
			require.NoError(t, err)
			text := string(data)
			for i := 0; i < len(tc.edits); i += 2 {
				require.Contains(t, text, tc.edits[i])
				text = strings.ReplaceAll(text, tc.edits[i], tc.edits[i+1])
			}
			require.NoError(t, os.WriteFile(manager, []byte(text), 0o600))
			problems := strings.Join(networkPolicyProblems(buildNetworkPolicyOverlay(t, config, true)), "\n")
			for _, want := range tc.want {
				assert.Contains(t, problems, want)
			}
		})
	}
}

// TestNetworkPolicyDocsQuoteTheOverlay: the overlay docs/install-access.md shows is
// the one the tests build, as it is.
func TestNetworkPolicyDocsQuoteTheOverlay(t *testing.T) {
	docs, err := os.ReadFile(repoPath("docs/install-access.md"))
	require.NoError(t, err)
	overlay, err := os.ReadFile(networkPolicyOverlay)
	require.NoError(t, err)
	assert.Contains(t, string(docs), string(overlay), "docs/install-access.md does not quote %s as it is", networkPolicyOverlay)
	assert.Contains(t, string(overlay), "components: [../"+networkPolicyComponent+"]")
}

// copyConfig copies config/ into a temporary directory and returns the copy.
func copyConfig(t *testing.T) string {
	t.Helper()
	config := filepath.Join(t.TempDir(), "config")
	require.NoError(t, os.CopyFS(config, os.DirFS(repoPath("config"))))
	return config
}

// buildNetworkPolicyOverlay builds an overlay beside the copy of config/ in
// config, as docs/install-access.md has one written: the overlay of
// networkPolicyOverlay, or, if !patched, the same without its patches.
func buildNetworkPolicyOverlay(t *testing.T, config string, patched bool) manifest {
	t.Helper()
	overlay := filepath.Join(filepath.Dir(config), "my-overlay")
	require.NoError(t, os.Mkdir(overlay, 0o755))
	data, err := os.ReadFile(networkPolicyOverlay)
	require.NoError(t, err)
	if !patched {
		text, _, found := strings.Cut(string(data), "patches:")
		require.True(t, found)
		data = []byte(text)
	}
	require.NoError(t, os.WriteFile(filepath.Join(overlay, "kustomization.yaml"), data, 0o600))
	return build(t, overlay)
}

// networkPolicyProblems checks the one NetworkPolicy of m against the guard's
// Deployment in m and says what does not match: what it selects, its policy
// types, the ports it admits against those the guard's servers listen on (by
// the container's flags, each declared as a containerPort), and whom it
// admits to each.
func networkPolicyProblems(m manifest) []string {
	var problems []string
	add := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }

	deps, nps := m.ofKind("Deployment"), m.ofKind("NetworkPolicy")
	if len(deps) != 1 || len(nps) != 1 {
		add("%d Deployments and %d NetworkPolicies, want one each", len(deps), len(nps))
		return problems
	}
	var dep appsv1.Deployment
	var np networkingv1.NetworkPolicy
	if err := runtime.DefaultUnstructuredConverter.FromUnstructuredWithValidation(deps[0].Object, &dep, true); err != nil {
		add("decoding the Deployment: %v", err)
		return problems
	}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructuredWithValidation(nps[0].Object, &np, true); err != nil {
		add("decoding the NetworkPolicy: %v", err)
		return problems
	}

	if np.Namespace != dep.Namespace {
		add("the NetworkPolicy is in namespace %q, the guard in %q", np.Namespace, dep.Namespace)
	}
	if len(np.Spec.PodSelector.MatchLabels)+len(np.Spec.PodSelector.MatchExpressions) == 0 {
		add("the podSelector selects every pod of the namespace")
	}
	if sel, err := metav1.LabelSelectorAsSelector(&np.Spec.PodSelector); err != nil {
		add("podSelector: %v", err)
	} else if !sel.Matches(labels.Set(dep.Spec.Template.Labels)) {
		add("the podSelector %s does not select the guard's pods (labels %v)", sel, dep.Spec.Template.Labels)
	}
	if !slices.Equal(np.Spec.PolicyTypes, []networkingv1.PolicyType{networkingv1.PolicyTypeIngress}) {
		add("policyTypes %v, want [Ingress]: egress is left alone", np.Spec.PolicyTypes)
	}
	if len(np.Spec.Egress) != 0 {
		add("%d egress rules, want none", len(np.Spec.Egress))
	}

	var container *corev1.Container
	for i := range dep.Spec.Template.Spec.Containers {
		if dep.Spec.Template.Spec.Containers[i].Name == "manager" {
			container = &dep.Spec.Template.Spec.Containers[i]
		}
	}
	if container == nil {
		add("the Deployment has no container named manager")
		return problems
	}
	servers, serverProblems := guardServerPorts(container)
	problems = append(problems, serverProblems...)

	// The rule that admits each port.
	admitted := map[int32]networkingv1.NetworkPolicyIngressRule{}
	for i, rule := range np.Spec.Ingress {
		if len(rule.Ports) == 0 {
			add("ingress rule %d admits every port", i)
		}
		for _, p := range rule.Ports {
			if p.Protocol == nil || *p.Protocol != corev1.ProtocolTCP {
				add("ingress rule %d: protocol %v, want TCP", i, p.Protocol)
			}
			if p.EndPort != nil {
				add("ingress rule %d: a port range up to %d", i, *p.EndPort)
			}
			if p.Port == nil {
				add("ingress rule %d admits every port", i)
				continue
			}
			port, ok := containerPortNumber(container, *p.Port)
			if !ok {
				add("ingress rule %d: port %s is no port of the guard's container", i, p.Port)
				continue
			}
			if _, dup := admitted[port]; dup {
				add("port %d is admitted by two rules", port)
			}
			admitted[port] = rule
		}
	}
	for _, server := range slices.Sorted(maps.Keys(servers)) {
		if _, ok := admitted[servers[server]]; !ok {
			add("the %s server's port %d (%s) is not admitted", server, servers[server], guardPortFlags[server])
		}
	}
	for _, port := range slices.Sorted(maps.Keys(admitted)) {
		if !slices.Contains(slices.Collect(maps.Values(servers)), port) {
			add("port %d is admitted but no server of the guard listens on it", port)
		}
	}

	// Whom each server's port admits.
	if rule, ok := admitted[servers["webhook"]]; ok {
		if len(rule.From) == 0 {
			add("the webhook port admits every source, want the API server's addresses")
		}
		for _, peer := range rule.From {
			if peer.IPBlock == nil || peer.PodSelector != nil || peer.NamespaceSelector != nil {
				add("the webhook port admits %+v, want an ipBlock (the API server is not a pod)", peer)
			}
		}
	}
	if rule, ok := admitted[servers["metrics"]]; ok {
		if len(rule.From) == 0 {
			add("the metrics port admits every source, want the monitoring namespace")
		}
		for _, peer := range rule.From {
			if peer.NamespaceSelector == nil || peer.PodSelector != nil || peer.IPBlock != nil ||
				len(peer.NamespaceSelector.MatchLabels) != 1 || peer.NamespaceSelector.MatchLabels[corev1.LabelMetadataName] == "" ||
				len(peer.NamespaceSelector.MatchExpressions) != 0 {
				add("the metrics port admits %+v, want a namespace by its %s label", peer, corev1.LabelMetadataName)
			}
		}
	}
	if rule, ok := admitted[servers["health"]]; ok && len(rule.From) != 0 {
		add("the health port admits only %+v, want every source (the kubelet's probes)", rule.From)
	}
	return problems
}

// guardServerPorts returns the port each of the guard's servers listens on,
// from the container's flags, and says which flag is missing or unreadable
// and which port the container does not declare.
func guardServerPorts(c *corev1.Container) (map[string]int32, []string) {
	var problems []string
	servers := map[string]int32{}
	for _, server := range slices.Sorted(maps.Keys(guardPortFlags)) {
		flag := guardPortFlags[server]
		var value string
		found := false
		for _, arg := range c.Args {
			if v, ok := strings.CutPrefix(arg, flag+"="); ok {
				value, found = v, true
			}
		}
		if !found {
			problems = append(problems, fmt.Sprintf("the Deployment does not set %s=…", flag))
			continue
		}
		if strings.Contains(value, ":") {
			_, p, err := net.SplitHostPort(value)
			if err != nil {
				problems = append(problems, fmt.Sprintf("%s=%s: %v", flag, value, err))
				continue
			}
			value = p
		}
		port, err := strconv.ParseInt(value, 10, 32)
		if err != nil || port <= 0 {
			problems = append(problems, fmt.Sprintf("%s=%s: not a port", flag, value))
			continue
		}
		servers[server] = int32(port)
		if _, ok := containerPortNumber(c, intstr.FromInt32(int32(port))); !ok {
			problems = append(problems, fmt.Sprintf("the %s server listens on %d (%s) but the container declares no such port", server, port, flag))
		}
	}
	return servers, problems
}

// containerPortNumber resolves a NetworkPolicy port, by number or by name,
// against the TCP ports the container declares.
func containerPortNumber(c *corev1.Container, port intstr.IntOrString) (int32, bool) {
	for _, p := range c.Ports {
		if p.Protocol != "" && p.Protocol != corev1.ProtocolTCP {
			continue
		}
		if (port.Type == intstr.Int && p.ContainerPort == port.IntVal) || (port.Type == intstr.String && p.Name == port.StrVal) {
			return p.ContainerPort, true
		}
	}
	return 0, false
}
