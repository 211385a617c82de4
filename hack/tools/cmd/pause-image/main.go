// Command pause-image packs the static pause binary (cmd/pause) as an image
// tarball in the format of docker save, which containerd's
// `ctr images import` reads: one layer with the binary at /pause, run as the
// numeric non-root user 65532:65532, every timestamp at the Unix epoch, so
// the same binary gives the same image. The test environment's node imports
// it as containerd's sandbox image, and tests run it as a workload
// (/pause --serve :8080). The tarball is replaced only when it changed.
package main

import (
	"archive/tar"
	"bytes"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

const (
	// Reference is the image's name, which the node's containerd
	// configuration names as its sandbox image.
	Reference = "localhost/rollout-guard/pause:v1"
	// Entrypoint is where the binary lives in the image.
	Entrypoint = "/pause"
	// User is a numeric non-root user, so that the kubelet can check
	// runAsNonRoot without an /etc/passwd in the image.
	User = "65532:65532"
)

func main() {
	binary := flag.String("binary", "", "the static pause binary to pack (required)")
	out := flag.String("out", "", "the tarball to write (required)")
	ref := flag.String("tag", Reference, "the image's name")
	flag.Parse()
	if *binary == "" || *out == "" {
		fmt.Fprintln(os.Stderr, "pause-image: --binary and --out are required")
		os.Exit(2)
	}
	if err := run(*binary, *out, *ref); err != nil {
		fmt.Fprintln(os.Stderr, "pause-image:", err)
		os.Exit(1)
	}
}

func run(binary, out, ref string) error {
	tag, err := name.NewTag(ref)
	if err != nil {
		return err
	}
	img, err := build(binary)
	if err != nil {
		return err
	}
	var buf bytes.Buffer
	if err := tarball.Write(tag, img, &buf); err != nil {
		return err
	}
	if old, err := os.ReadFile(out); err == nil && bytes.Equal(old, buf.Bytes()) {
		fmt.Printf("%s: %s (up to date)\n", out, ref)
		return nil
	}
	tmp := out + ".tmp"
	if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(tmp, buf.Bytes(), 0o644); err != nil {
		return err
	}
	if err := os.Rename(tmp, out); err != nil {
		return err
	}
	fmt.Printf("%s: %s written\n", out, ref)
	return nil
}

// build is the image: one uncompressed layer with the binary.
func build(binary string) (v1.Image, error) {
	data, err := os.ReadFile(binary)
	if err != nil {
		return nil, err
	}
	var layerTar bytes.Buffer
	tw := tar.NewWriter(&layerTar)
	epoch := time.Unix(0, 0).UTC()
	if err := tw.WriteHeader(&tar.Header{
		Typeflag: tar.TypeReg, Name: Entrypoint[1:], Mode: 0o755, Size: int64(len(data)), ModTime: epoch, Format: tar.FormatPAX,
	}); err != nil {
		return nil, err
	}
	if _, err := tw.Write(data); err != nil {
		return nil, err
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	blob := layerTar.Bytes()
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(blob)), nil
	})
	if err != nil {
		return nil, err
	}
	img, err := mutate.Append(empty.Image, mutate.Addendum{
		Layer:   layer,
		History: v1.History{Created: v1.Time{Time: epoch}, CreatedBy: "COPY pause " + Entrypoint + " # hack/tools/cmd/pause-image"},
	})
	if err != nil {
		return nil, err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture = "linux", runtime.GOARCH
	cf.Created = v1.Time{Time: epoch}
	cf.Config = v1.Config{User: User, Entrypoint: []string{Entrypoint}}
	return mutate.ConfigFile(img, cf)
}
