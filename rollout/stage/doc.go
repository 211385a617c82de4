// Package stage is the staged rollout of many ClusterClass clusters:
// `rollout cluster -l SELECTOR --version V` (or --class NEW). The clusters
// are ordered (by a label, then by name) and split into waves (--waves
// 1,25%,100%); every cluster's change is planned and checked against the
// policy before the first edit; then wave by wave each cluster is edited
// (one request with a resourceVersion precondition, through the guard like
// any other), watched as `rollout status` watches it, and the finished wave
// must stay healthy for --soak before the next one starts. A stall, a
// refusal or a remediation halts the rollout with the cluster named.
//
// The state is the clusters themselves: a cluster whose topology is at the
// target already counts as edited, so running the same command again after
// a halt or an interruption continues where it stopped and never edits a
// cluster twice.
package stage
