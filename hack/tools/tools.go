// Package tools pins the versions of the binaries that hack/tools builds into
// bin/: kube-apiserver, etcd and kubectl. It lives in its own Go module so that
// k8s.io/kubernetes never enters the product's dependency graph. promtool and
// kube-state-metrics, which the monitoring tests run, are pinned by modules
// of their own (hack/tools/prometheus, hack/tools/kube-state-metrics): they
// need newer k8s.io libraries than kube-apiserver's.
package tools
