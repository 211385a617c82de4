// Command release writes a release of rollout-guard into one directory:
// `make release VERSION=v0.1.0` runs it. See --help.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"time"
)

const usage = `release writes a release of rollout-guard into --out (emptied first):

  install.yaml                        config/default rendered with kustomize, its image
                                      --img at the image's digest (repo@sha256:...), or
                                      rollout-guard/webhook:VERSION without --img
  webhook-image_VERSION_linux_amd64.tar
  webhook-image_VERSION_linux_arm64.tar
                                      the guard's image, docker-save tarballs (as make image
                                      writes them; its OCI layout goes to --image-dir/oci)
  rollout_VERSION_OS_ARCH.tar.gz      the rollout CLI for linux and darwin, amd64 and arm64,
                                      each with the binary and LICENSE
  capi-rollout.yaml                   the krew plugin manifest of those archives (kubectl
                                      capi-rollout ...), checked with krew's own
                                      validate-krew-manifest and installer, or the release fails
  SHA256SUMS                          sha256sum of every other file (sha256sum -c SHA256SUMS)

Binaries are cross-compiled as make image builds them (CGO_ENABLED=0,
-trimpath, -ldflags "-X main.version=VERSION") into --bin-dir/<os>_<arch>/.
Every timestamp of the image and the archives is --source-date-epoch, so the
same commit and VERSION give the same files.

  release --root DIR --version v0.1.0 [--img REGISTRY/REPOSITORY[:TAG]] [--out DIR]

Flags:
`

func main() {
	var o Options
	fs := flag.NewFlagSet("release", flag.ContinueOnError)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), usage)
		fs.PrintDefaults()
	}
	fs.StringVar(&o.Root, "root", "../..", "the repository's root")
	fs.StringVar(&o.Version, "version", "", "the release's version, v-prefixed semver (required)")
	fs.StringVar(&o.Img, "img", "", "the registry and repository the image will be pushed to (make push IMG=...); empty for an image imported from its tarballs")
	fs.StringVar(&o.Out, "out", "", "the release's directory (default ROOT/dist)")
	fs.StringVar(&o.BinDir, "bin-dir", "", "where the binaries are built (default ROOT/bin/cross)")
	fs.StringVar(&o.ImageDir, "image-dir", "", "where the image's OCI layout goes, as DIR/oci (default ROOT/bin/image, where make push reads it)")
	fs.StringVar(&o.Revision, "revision", "", "the commit, for the image's org.opencontainers.image.revision")
	epoch, _ := strconv.ParseInt(os.Getenv("SOURCE_DATE_EPOCH"), 10, 64)
	fs.Int64Var(&epoch, "source-date-epoch", epoch, "every timestamp of the image and the archives, in seconds since 1970 (default $SOURCE_DATE_EPOCH)")
	fs.StringVar(&o.DownloadURL, "download-url", "", "where the archives will be published, for the krew manifest (default the GitHub release of VERSION)")
	if err := fs.Parse(os.Args[1:]); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return
		}
		os.Exit(2)
	}
	root, err := filepath.Abs(o.Root)
	if err != nil {
		fail(err)
	}
	o.Root = root
	o.ToolsDir = filepath.Join(root, "hack", "tools")
	if o.Out == "" {
		o.Out = filepath.Join(root, "dist")
	}
	if o.BinDir == "" {
		o.BinDir = filepath.Join(root, "bin", "cross")
	}
	if o.ImageDir == "" {
		o.ImageDir = filepath.Join(root, "bin", "image")
	}
	if o.DownloadURL == "" {
		o.DownloadURL = "https://github.com/rollout-guard/rollout-guard/releases/download/" + o.Version
	}
	o.Created = time.Unix(epoch, 0).UTC()
	o.Log = func(format string, args ...any) { fmt.Fprintf(os.Stderr, format+"\n", args...) }

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	start := time.Now()
	if err := Run(ctx, o); err != nil {
		fail(err)
	}
	entries, err := os.ReadDir(o.Out)
	if err != nil {
		fail(err)
	}
	fmt.Fprintf(os.Stderr, "release %s in %s (%.0fs):\n", o.Version, o.Out, time.Since(start).Seconds())
	for _, e := range entries {
		info, err := e.Info()
		if err != nil {
			fail(err)
		}
		fmt.Fprintf(os.Stderr, "  %-40s %10d\n", e.Name(), info.Size())
	}
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "release:", err)
	os.Exit(1)
}
