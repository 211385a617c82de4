// Package handlers benchmarks the guard's KubeadmControlPlane validating
// webhook next to Cluster API's own (v1.14.2) on the same AdmissionReviews,
// as a reference: both are registered on controller-runtime managers and
// served the same HTTP requests through their webhook server's mux, so both
// pay the same HTTP and decoding cost. The guard reads through a real cache
// filled from a real kube-apiserver (test/framework). The benchmarks live in
// the test module because Cluster API's webhooks come with its controllers,
// which the product module must not depend on.
package handlers
