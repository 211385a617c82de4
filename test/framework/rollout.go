package framework

import (
	"context"
	"io"
	"strings"

	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/rollout-guard/rollout-guard/rollout"
)

// RunRollout runs the rollout CLI in-process, as cmd/rollout does, with args
// against the API server of kubeconfig, writing to stdout and stderr;
// cacheDir holds its discovery cache (a test's TempDir). It returns the
// exit code.
func RunRollout(ctx context.Context, kubeconfig, cacheDir string, stdout, stderr io.Writer, args ...string) int {
	return rollout.Execute(ctx, RolloutOptions(cacheDir, stdout, stderr), append(args, "--kubeconfig="+kubeconfig))
}

// RolloutOptions are the options RunRollout runs the CLI with, for a test
// that sets more of them (its clock, a hook before writes).
func RolloutOptions(cacheDir string, stdout, stderr io.Writer) rollout.Options {
	flags := genericclioptions.NewConfigFlags(true)
	flags.CacheDir = &cacheDir
	return rollout.Options{
		IOStreams:   genericiooptions.IOStreams{In: strings.NewReader(""), Out: stdout, ErrOut: stderr},
		ConfigFlags: flags,
		Version:     "test",
	}
}
