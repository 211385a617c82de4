package node

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/rollout-guard/rollout-guard/test/framework"
)

const (
	namespace = "node-proof"
	appName   = "echo"
	httpPort  = 8080
)

// TestDeploymentServesHTTP runs the sandbox image as a Deployment of two
// replicas under the restricted Pod Security Standard and checks that both
// become Ready on the node, that the host reaches each Pod at its IP, that
// the Service's EndpointSlice lists both (what the API server calls a
// webhook Service at), that the API server reaches them through the Service
// and reads their logs from the kubelet, and that a Pod reaches the API
// server as its ServiceAccount.
func TestDeploymentServesHTTP(t *testing.T) {
	requireNode(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	c := env.Client

	images, err := node.Images(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(images, framework.NodeSandboxImage) {
		t.Fatalf("the node's containerd holds %v, not the sandbox image %s", images, framework.NodeSandboxImage)
	}

	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace, Labels: map[string]string{
		"pod-security.kubernetes.io/enforce": "restricted",
	}}}
	if err := c.Create(ctx, ns); err != nil {
		t.Fatal(err)
	}
	labels := map[string]string{"app": appName}
	deploy := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: appName},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](2),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					SecurityContext: &corev1.PodSecurityContext{
						RunAsNonRoot:   ptr.To(true),
						RunAsUser:      ptr.To[int64](65532),
						RunAsGroup:     ptr.To[int64](65532),
						SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
					},
					TerminationGracePeriodSeconds: ptr.To[int64](5),
					Containers: []corev1.Container{{
						Name:            appName,
						Image:           framework.NodeSandboxImage,
						ImagePullPolicy: corev1.PullNever,
						Args:            []string{"--serve", fmt.Sprintf(":%d", httpPort)},
						Ports:           []corev1.ContainerPort{{Name: "http", ContainerPort: httpPort}},
						ReadinessProbe: &corev1.Probe{
							ProbeHandler:  corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/healthz", Port: intstr.FromString("http")}},
							PeriodSeconds: 1,
						},
						SecurityContext: &corev1.SecurityContext{
							AllowPrivilegeEscalation: ptr.To(false),
							ReadOnlyRootFilesystem:   ptr.To(true),
							Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
						},
					}},
				},
			},
		},
	}
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: appName},
		Spec: corev1.ServiceSpec{
			Selector: labels,
			Ports:    []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromString("http")}},
		},
	}
	begin := time.Now()
	if err := c.Create(ctx, svc); err != nil {
		t.Fatal(err)
	}
	if err := c.Create(ctx, deploy); err != nil {
		t.Fatal(err)
	}

	framework.WaitFor(t, 3*time.Minute, time.Second, "both replicas Ready", func() (bool, string) {
		if err := c.Get(ctx, client.ObjectKeyFromObject(deploy), deploy); err != nil {
			return false, err.Error()
		}
		if deploy.Status.ReadyReplicas == 2 {
			return true, ""
		}
		return false, fmt.Sprintf("%d of 2 ready; %s\nkubelet:\n%s", deploy.Status.ReadyReplicas, describePods(ctx, c), node.LogTail("kubelet"))
	})
	t.Logf("both replicas Ready %s after the Deployment's creation", time.Since(begin).Round(time.Millisecond))

	var pods corev1.PodList
	if err := c.List(ctx, &pods, client.InNamespace(namespace), client.MatchingLabels(labels)); err != nil {
		t.Fatal(err)
	}
	httpClient := &http.Client{Timeout: 5 * time.Second}
	var podIPs []string
	for _, pod := range pods.Items {
		if pod.DeletionTimestamp != nil || pod.Status.PodIP == "" {
			continue
		}
		podIPs = append(podIPs, pod.Status.PodIP)
		url := "http://" + net.JoinHostPort(pod.Status.PodIP, fmt.Sprint(httpPort)) + "/"
		if body := get(ctx, t, httpClient, url); body != pod.Name {
			t.Errorf("GET %s from the host answered %q, want the Pod's name %q", url, body, pod.Name)
		}
	}
	if len(podIPs) != 2 {
		t.Fatalf("%d running Pods with an IP, want 2: %s", len(podIPs), describePods(ctx, c))
	}

	// The endpoints the API server resolves a webhook Service to with
	// --enable-aggregator-routing.
	framework.WaitFor(t, time.Minute, time.Second, "the Service's EndpointSlice lists both Pods as ready", func() (bool, string) {
		var list discoveryv1.EndpointSliceList
		if err := c.List(ctx, &list, client.InNamespace(namespace), client.MatchingLabels{discoveryv1.LabelServiceName: appName}); err != nil {
			return false, err.Error()
		}
		var ready []string
		for _, s := range list.Items {
			for _, ep := range s.Endpoints {
				if ep.Conditions.Ready != nil && *ep.Conditions.Ready {
					ready = append(ready, ep.Addresses...)
				}
			}
		}
		return len(ready) == 2, fmt.Sprintf("ready endpoints %v, Pods %v", ready, podIPs)
	})

	// The API server dials a Pod behind the Service (its proxy picks an
	// endpoint, as the webhook resolver does).
	cs, err := kubernetes.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	body, err := cs.CoreV1().Services(namespace).ProxyGet("http", appName, "80", "/", nil).DoRaw(ctx)
	if err != nil {
		t.Fatalf("GET through the API server's proxy of the Service: %v", err)
	}
	if name := strings.TrimSpace(string(body)); !slices.ContainsFunc(pods.Items, func(p corev1.Pod) bool { return p.Name == name }) {
		t.Errorf("the API server's proxy of the Service answered %q, not a Pod's name", name)
	}

	// The API server reaches the kubelet: a Pod's log.
	logs, err := cs.CoreV1().Pods(namespace).GetLogs(pods.Items[0].Name, &corev1.PodLogOptions{}).DoRaw(ctx)
	if err != nil {
		t.Errorf("reading a Pod's log through the API server: %v", err)
	} else if !strings.Contains(string(logs), "serving HTTP on") {
		t.Errorf("a Pod's log through the API server is %q, want the line the server writes when it starts", logs)
	}

	// A Pod reaches the API server as an in-cluster client does: the
	// kubernetes Service's ClusterIP, the mounted CA and token.
	url := "http://" + net.JoinHostPort(podIPs[0], fmt.Sprint(httpPort)) + "/apiserver"
	review := get(ctx, t, httpClient, url)
	t.Logf("a Pod's SelfSubjectReview through the kubernetes Service: %s", strings.SplitN(review, "\n", 2)[0])
	if want := "system:serviceaccount:" + namespace + ":default"; !strings.HasPrefix(review, "201 ") || !strings.Contains(review, want) {
		t.Errorf("a Pod's SelfSubjectReview through the kubernetes Service answered\n%s\nwant 201 Created naming %s", review, want)
	}
}

// get returns the trimmed body of a GET of url that answers 200, failing
// the test otherwise.
func get(ctx context.Context, t *testing.T, httpClient *http.Client, url string) string {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := httpClient.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("GET %s: reading the body: %v", url, err)
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s: %s", url, resp.Status, body)
	}
	return strings.TrimSpace(string(body))
}

// describePods summarises the namespace's Pods and their last events, for
// failure messages.
func describePods(ctx context.Context, c client.Client) string {
	var b strings.Builder
	var pods corev1.PodList
	if err := c.List(ctx, &pods, client.InNamespace(namespace)); err != nil {
		return err.Error()
	}
	for _, p := range pods.Items {
		fmt.Fprintf(&b, "\n  pod %s: %s node=%q ip=%q", p.Name, p.Status.Phase, p.Spec.NodeName, p.Status.PodIP)
		for _, cs := range p.Status.ContainerStatuses {
			fmt.Fprintf(&b, " %s ready=%t restarts=%d", cs.Name, cs.Ready, cs.RestartCount)
			if w := cs.State.Waiting; w != nil {
				fmt.Fprintf(&b, " waiting %s: %s", w.Reason, w.Message)
			}
		}
	}
	var events corev1.EventList
	if err := c.List(ctx, &events, client.InNamespace(namespace)); err == nil {
		items := events.Items
		if len(items) > 10 {
			items = items[len(items)-10:]
		}
		for _, e := range items {
			fmt.Fprintf(&b, "\n  event %s %s/%s: %s: %s", e.Type, e.InvolvedObject.Kind, e.InvolvedObject.Name, e.Reason, e.Message)
		}
	}
	return b.String()
}
