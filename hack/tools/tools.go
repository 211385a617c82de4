// Package tools pins the versions of the binaries that hack/tools builds into
// bin/: kube-apiserver, etcd and kubectl (built by makerun/, the driver of
// make run and make tools). It lives in its own Go module so that
// k8s.io/kubernetes never enters the product's dependency graph. promtool and
// kube-state-metrics, which the monitoring tests run, are pinned by modules
// of their own (hack/tools/prometheus, hack/tools/kube-state-metrics): they
// need newer k8s.io libraries than kube-apiserver's.
//
// The module also holds the builders of the guard's image and of a release
// (image/, release/, with internal/build and internal/image): their
// dependencies — go-containerregistry, kustomize's Go API and krew, whose
// validate-krew-manifest and installer are go.mod tools — stay out of the
// product's go.mod. krew asks for k8s.io/client-go v11.0.0+incompatible, which
// go.mod then lists; the replace directives of go.mod build every k8s.io module
// at v0.36.3 all the same.
package tools
