package main

import "testing"

func TestIsDiscovery(t *testing.T) {
	tests := []struct {
		request string
		want    bool
	}{
		{"GET /api?timeout=32s", true},
		{"GET /apis?timeout=32s", true},
		{"GET /api/v1", true},
		{"GET /apis/cluster.x-k8s.io/v1beta2", true},
		{"GET /openapi/v3", true},
		{"GET /version", true},
		{"GET /apis/cluster.x-k8s.io/v1beta2/namespaces/ns/machinedeployments/md", false},
		{"GET /apis/rollout-guard.io/v1alpha1/namespaces/ns/rolloutrevisions?labelSelector=x", false},
		{"GET /api/v1/namespaces/ns", false},
	}
	for _, tt := range tests {
		if got := isDiscovery(tt.request); got != tt.want {
			t.Errorf("isDiscovery(%q) = %v, want %v", tt.request, got, tt.want)
		}
	}
}
