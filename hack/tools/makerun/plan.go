package main

import (
	"path/filepath"
	"strconv"
	"strings"
)

// Step is one build of the plan: go build of Packages in the module at Dir,
// each into BinDir/Outputs[i].
type Step struct {
	// Name is what the step line calls the binaries: "kube-apiserver",
	// "webhook and rollout".
	Name string
	// Version is the version the binaries are built at and, with Check,
	// report ("v1.36.3"); for the repository's own binaries, the VERSION
	// they are stamped with.
	Version string
	// Stage orders the steps: every step of a stage ends before the next
	// stage starts. Within a stage, each Lane runs its steps in plan order,
	// the lanes side by side.
	Stage, Lane int
	// Dir is the module directory go build runs in.
	Dir string
	// Packages are the main packages go build builds, in one invocation.
	Packages []string
	// Outputs names the binary of each package in the bin directory.
	Outputs []string
	// LDFlags are go build's -ldflags (the version stamped in).
	LDFlags string
	// Check, when set, is how to tell that the binary already there is the
	// one this step would build, so that the step is skipped: the pinned
	// tools print their version. Without it go build always runs; its cache
	// makes that a matter of seconds when nothing changed (it does not even
	// relink a binary whose build ID matches).
	Check *VersionCheck
}

// VersionCheck runs a binary with Args and looks for Want in what it prints.
type VersionCheck struct {
	// Args are the arguments that make the binary print its version.
	Args []string
	// Want is what its output holds when it is the pinned version.
	Want string
}

// Label is the step's name with its version, as the step line shows it.
func (s Step) Label() string {
	if s.Version == "" {
		return s.Name
	}
	return s.Name + " " + s.Version
}

// Versions are the versions the pinned tools are built at, from the
// go.mod files of hack/tools and test.
type Versions struct {
	// Kubernetes is k8s.io/kubernetes' version in hack/tools (kube-apiserver).
	Kubernetes string
	// Etcd is go.etcd.io/etcd/server/v3's version in hack/tools.
	Etcd string
	// Kubectl is k8s.io/kubectl's version in hack/tools, as kubectl reports
	// it (v0.36.3 is kubectl v1.36.3).
	Kubectl string
	// ClusterAPI is sigs.k8s.io/cluster-api's version in test (capi-core,
	// capi-kcp); needed only when the sandbox runs them.
	ClusterAPI string
}

// Config is what the plan depends on.
type Config struct {
	// Root is the repository's root.
	Root string
	// Version is the VERSION the guard and the CLI are stamped with.
	Version string
	// SandboxArgs are the sandbox's flags: --runtime-sdk and
	// --in-place-updates make it run bin/capi-core and bin/capi-kcp.
	SandboxArgs []string
	// ToolsOnly plans only etcd, kubectl and kube-apiserver (make tools).
	ToolsOnly bool
	// Warm says that go's cache most likely holds what the builds share
	// (bin/sandbox exists: make run ran here before), so the guard's build
	// need not go first.
	Warm bool
}

// The stages and lanes of the plan (see Plan).
const (
	stageProduct = 0 // the guard and the CLI: first, alone
	stageRest    = 1 // the pinned tools beside the sandbox's own build
	laneTools    = 0
	laneSandbox  = 1
	laneProduct  = 2
)

// Plan lists the builds of make run: the pinned tools the sandbox starts
// (etcd, kube-apiserver) or prints in its tour (kubectl), the guard and the
// CLI (the tour's rollout commands), the sandbox itself, and Cluster API's managers when its flags ask
// for them. promtool and kube-state-metrics, which only the monitoring tests
// run, are not in it.
//
// The guard and the CLI come first and alone: they share the standard
// library and the k8s.io libraries at the same versions with both lanes
// that follow, which then find them compiled in go's cache instead of
// compiling them twice side by side. Then the pinned tools (hack/tools) and
// the sandbox's own build (test/) run side by side: on two cores one fills
// the other's idle time (module downloads, links, the narrow ends of the
// dependency graphs). With a warm cache (cfg.Warm) nothing is compiled
// twice either way, and the guard's build — a relink whenever VERSION
// changed, at every commit — runs beside the others from the start.
func Plan(cfg Config, v Versions) []Step {
	tools := filepath.Join(cfg.Root, "hack", "tools")
	test := filepath.Join(cfg.Root, "test")
	steps := []Step{}
	if !cfg.ToolsOnly {
		steps = append(steps, Step{
			Name: "webhook and rollout", Version: cfg.Version, Stage: stageProduct,
			Dir: cfg.Root, Packages: []string{"./cmd/webhook", "./cmd/rollout"}, Outputs: []string{"webhook", "rollout"},
			LDFlags: "-X main.version=" + cfg.Version,
		})
		if cfg.Warm {
			steps[0].Stage, steps[0].Lane = stageRest, laneProduct
		}
	}
	steps = append(steps,
		Step{
			Name: "etcd", Version: v.Etcd, Stage: stageRest, Lane: laneTools,
			Dir: tools, Packages: []string{"./cmd/etcd"}, Outputs: []string{"etcd"},
			LDFlags: "-s -w",
			Check:   &VersionCheck{Args: []string{"--version"}, Want: "etcd Version: " + strings.TrimPrefix(v.Etcd, "v")},
		},
		Step{
			Name: "kubectl", Version: v.Kubectl, Stage: stageRest, Lane: laneTools,
			Dir: tools, Packages: []string{"./cmd/kubectl"}, Outputs: []string{"kubectl"},
			LDFlags: KubernetesLDFlags(v.Kubectl),
			Check:   &VersionCheck{Args: []string{"version", "--client"}, Want: "Client Version: " + v.Kubectl},
		},
		Step{
			Name: "kube-apiserver", Version: v.Kubernetes, Stage: stageRest, Lane: laneTools,
			Dir: tools, Packages: []string{"./cmd/kube-apiserver"}, Outputs: []string{"kube-apiserver"},
			LDFlags: KubernetesLDFlags(v.Kubernetes),
			Check:   &VersionCheck{Args: []string{"--version"}, Want: "Kubernetes " + v.Kubernetes},
		},
	)
	if cfg.ToolsOnly {
		for i := range steps {
			steps[i].Stage = 0
		}
		return steps
	}
	steps = append(steps, Step{
		Name: "sandbox", Stage: stageRest, Lane: laneSandbox,
		Dir: test, Packages: []string{"./cmd/sandbox"}, Outputs: []string{"sandbox"},
	})
	runtimeSDK, inPlace := flagOn(cfg.SandboxArgs, "runtime-sdk"), flagOn(cfg.SandboxArgs, "in-place-updates")
	capiFlags := "-X sigs.k8s.io/cluster-api/version.gitVersion=" + v.ClusterAPI
	if runtimeSDK || inPlace {
		steps = append(steps, Step{
			Name: "capi-core", Version: v.ClusterAPI, Stage: stageRest, Lane: laneSandbox,
			Dir: test, Packages: []string{"sigs.k8s.io/cluster-api/core"}, Outputs: []string{"capi-core"},
			LDFlags: capiFlags,
		})
	}
	if inPlace {
		steps = append(steps, Step{
			Name: "capi-kcp", Version: v.ClusterAPI, Stage: stageRest, Lane: laneSandbox,
			Dir: test, Packages: []string{"sigs.k8s.io/cluster-api/controlplane/kubeadm"}, Outputs: []string{"capi-kcp"},
			LDFlags: capiFlags,
		})
	}
	return steps
}

// NeedsClusterAPIVersion reports whether the plan for cfg builds Cluster
// API's managers, whose version comes from the test module.
func NeedsClusterAPIVersion(cfg Config) bool {
	return !cfg.ToolsOnly && (flagOn(cfg.SandboxArgs, "runtime-sdk") || flagOn(cfg.SandboxArgs, "in-place-updates"))
}

// KubernetesLDFlags is what makes a Kubernetes binary report version
// (hack/tools/lib.sh's version_ldflags).
func KubernetesLDFlags(version string) string {
	minor := ""
	if parts := strings.SplitN(strings.TrimPrefix(version, "v"), ".", 3); len(parts) >= 2 {
		minor = parts[1]
	}
	return "-s -w -X k8s.io/component-base/version.gitVersion=" + version +
		" -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=" + minor
}

// KubectlVersion is the version kubectl reports for k8s.io/kubectl's module
// version: the library's v0.N.M is the command's v1.N.M.
func KubectlVersion(module string) string {
	if rest, ok := strings.CutPrefix(module, "v0."); ok {
		return "v1." + rest
	}
	return module
}

// flagOn reports whether the Go flag name is set to true in args, the way
// the flag package reads it: -name, --name, -name=true (or 1, t, T, TRUE,
// True); -name=false turns it off again. Parsing stops at the first
// non-flag argument or "--".
func flagOn(args []string, name string) bool {
	on := false
	for _, a := range args {
		if a == "--" || !strings.HasPrefix(a, "-") {
			break
		}
		n, value, hasValue := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if n != name {
			continue
		}
		if !hasValue {
			on = true
			continue
		}
		b, err := strconv.ParseBool(value)
		on = err == nil && b
	}
	return on
}

// Stages groups the steps' indexes by stage, then by lane, in plan order.
// lanes caps the number of lanes a stage runs side by side: with 1, every
// step runs alone, in plan order.
func Stages(steps []Step, lanes int) [][][]int {
	var stages [][][]int
	for i, s := range steps {
		for len(stages) <= s.Stage {
			stages = append(stages, nil)
		}
		lane := s.Lane
		if lanes <= 1 {
			lane = 0
		} else if lane >= lanes {
			lane = lanes - 1
		}
		for len(stages[s.Stage]) <= lane {
			stages[s.Stage] = append(stages[s.Stage], nil)
		}
		stages[s.Stage][lane] = append(stages[s.Stage][lane], i)
	}
	// Drop empty stages and lanes.
	var out [][][]int
	for _, st := range stages {
		var lanes [][]int
		for _, l := range st {
			if len(l) > 0 {
				lanes = append(lanes, l)
			}
		}
		if len(lanes) > 0 {
			out = append(out, lanes)
		}
	}
	return out
}
