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
	flags := genericclioptions.NewConfigFlags(true)
	flags.CacheDir = &cacheDir
	opts := rollout.Options{
		IOStreams:   genericiooptions.IOStreams{In: strings.NewReader(""), Out: stdout, ErrOut: stderr},
		ConfigFlags: flags,
		Version:     "test",
	}
	return rollout.Execute(ctx, opts, append(args, "--kubeconfig="+kubeconfig))
}
