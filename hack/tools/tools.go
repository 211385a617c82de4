// Package tools pins the versions of the binaries that hack/tools builds into
// bin/: kube-apiserver, etcd and kubectl. It lives in its own Go module so that
// k8s.io/kubernetes never enters the product's dependency graph.
package tools
