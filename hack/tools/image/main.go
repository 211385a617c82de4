// Command image builds the guard's OCI image without a container engine and
// pushes it: `make image` and `make push` run it. See --help.
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

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/rollout-guard/rollout-guard/hack/tools/internal/build"
	"github.com/rollout-guard/rollout-guard/hack/tools/internal/image"
)

const usage = `image builds rollout-guard's admission webhook server (cmd/webhook) into an
OCI image without a container engine, and pushes it.

  image build --root DIR --version V [--img REF] [--out DIR] [--bin-dir DIR]
              [--revision SHA] [--source-date-epoch SECONDS]
  image push  --img REGISTRY/REPOSITORY:TAG [--layout DIR]

build cross-compiles cmd/webhook for linux/amd64 and linux/arm64 (static:
CGO_ENABLED=0, -trimpath, -ldflags "-X main.version=V" as make build) into
--bin-dir/<os>_<arch>/webhook and makes one image per platform: an empty
base (no shell, no CA bundle, no /etc/passwd: the guard needs none), the
binary at /webhook, user 65532:65532, entrypoint ["/webhook"], the OCI labels
org.opencontainers.image.{title,source,version,revision,licenses,created}.
Every timestamp is --source-date-epoch (default: $SOURCE_DATE_EPOCH, else 0),
so the same source and version give the same digest. It writes into --out:

  oci/                               an OCI image layout: the image index of both platforms
  webhook-image_V_linux_amd64.tar    docker-save tarballs, one per platform, tagged --img
  webhook-image_V_linux_arm64.tar    (default rollout-guard/webhook:V), for
                                     ctr -n k8s.io images import FILE  or  docker load -i FILE

push pushes the image index of the layout (--out/oci of build) to the
registry and repository of --img, with the credentials of the default
keychain (docker login, $DOCKER_CONFIG), and prints the digest reference.

Flags of each command:
`

func main() {
	if len(os.Args) < 2 || os.Args[1] == "-h" || os.Args[1] == "--help" || os.Args[1] == "help" {
		fmt.Fprint(os.Stderr, usage)
		fmt.Fprintln(os.Stderr, "build:")
		buildFlags(new(buildOptions)).PrintDefaults()
		fmt.Fprintln(os.Stderr, "push:")
		pushFlags(new(pushOptions)).PrintDefaults()
		if len(os.Args) < 2 {
			os.Exit(2)
		}
		return
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	var err error
	switch os.Args[1] {
	case "build":
		err = runBuild(ctx, os.Args[2:])
	case "push":
		err = runPush(ctx, os.Args[2:])
	default:
		err = fmt.Errorf("unknown command %q: build or push (see --help)", os.Args[1])
	}
	if errors.Is(err, flag.ErrHelp) {
		return
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "image:", err)
		os.Exit(1)
	}
}

type buildOptions struct {
	root, version, img, out, binDir, revision string
	epoch                                     int64
}

func buildFlags(o *buildOptions) *flag.FlagSet {
	fs := flag.NewFlagSet("image build", flag.ContinueOnError)
	fs.StringVar(&o.root, "root", "../..", "the repository's root (the product module)")
	fs.StringVar(&o.version, "version", "", "the version the binary reports and the image's labels name (required)")
	fs.StringVar(&o.img, "img", "", "the reference the tarballs are tagged with (default rollout-guard/webhook:VERSION)")
	fs.StringVar(&o.out, "out", "", "where the OCI layout and the tarballs go (default ROOT/bin/image)")
	fs.StringVar(&o.binDir, "bin-dir", "", "where the cross-compiled binaries go (default ROOT/bin/cross)")
	fs.StringVar(&o.revision, "revision", "", "the commit, for org.opencontainers.image.revision")
	epoch, _ := strconv.ParseInt(os.Getenv("SOURCE_DATE_EPOCH"), 10, 64)
	fs.Int64Var(&o.epoch, "source-date-epoch", epoch, "every timestamp of the image, in seconds since 1970 (default $SOURCE_DATE_EPOCH)")
	return fs
}

type pushOptions struct{ img, layout string }

func pushFlags(o *pushOptions) *flag.FlagSet {
	fs := flag.NewFlagSet("image push", flag.ContinueOnError)
	fs.StringVar(&o.img, "img", "", "the registry, repository and tag to push to (required)")
	fs.StringVar(&o.layout, "layout", "../../bin/image/oci", "the OCI layout that image build wrote")
	return fs
}

func runBuild(ctx context.Context, args []string) error {
	var o buildOptions
	if err := buildFlags(&o).Parse(args); err != nil {
		return err
	}
	if o.version == "" {
		return errors.New("--version is required")
	}
	root, err := filepath.Abs(o.root)
	if err != nil {
		return err
	}
	if o.out == "" {
		o.out = filepath.Join(root, "bin", "image")
	}
	if o.binDir == "" {
		o.binDir = filepath.Join(root, "bin", "cross")
	}
	tag, err := image.Tag(o.img, o.version)
	if err != nil {
		return err
	}
	platforms, err := build.Platforms(image.Platforms...)
	if err != nil {
		return err
	}
	opts := image.Options{Version: o.version, Revision: o.revision, Created: time.Unix(o.epoch, 0).UTC()}
	for _, p := range platforms {
		b, err := build.Command(ctx, root, o.binDir, "webhook", o.version, p, logf)
		if err != nil {
			return err
		}
		opts.Binaries = append(opts.Binaries, image.Binary{Platform: p, Path: b.Path})
	}
	idx, err := image.Build(opts)
	if err != nil {
		return err
	}
	digest, err := idx.Digest()
	if err != nil {
		return err
	}
	layoutDir := filepath.Join(o.out, "oci")
	if err := image.WriteLayout(layoutDir, idx, tag); err != nil {
		return err
	}
	tarballs, err := image.WriteTarballs(o.out, idx, tag, o.version)
	if err != nil {
		return err
	}
	logf("image index %s (%s, created %s)", digest, tag, opts.Created.Format(time.RFC3339))
	logf("OCI layout: %s (make push IMG=registry.example.com/rollout-guard/webhook:%s pushes it)", layoutDir, o.version)
	for _, t := range tarballs {
		logf("tarball:    %s (ctr -n k8s.io images import %s)", t, filepath.Base(t))
	}
	return nil
}

func runPush(ctx context.Context, args []string) error {
	var o pushOptions
	if err := pushFlags(&o).Parse(args); err != nil {
		return err
	}
	if o.img == "" {
		return errors.New("--img is required: the registry, repository and tag to push to, e.g. registry.example.com/rollout-guard/webhook:v0.1.0")
	}
	ref, err := name.ParseReference(o.img)
	if err != nil {
		return fmt.Errorf("--img %s: %w", o.img, err)
	}
	if _, err := os.Stat(filepath.Join(o.layout, "index.json")); err != nil {
		return fmt.Errorf("no image in %s: build it first (make image, or make release)", o.layout)
	}
	digest, err := image.Push(ctx, o.layout, ref, remote.WithAuthFromKeychain(authn.DefaultKeychain))
	if err != nil {
		return err
	}
	logf("pushed %s", o.img)
	fmt.Println(image.RepositoryOf(o.img) + "@" + digest.String())
	return nil
}

func logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, format+"\n", args...)
}
