// Package image builds the guard's OCI image without a container engine,
// with go-containerregistry: one image per platform on an empty base (as
// distroless static is empty of a shell), holding only the static binary at
// /webhook, run as the numeric non-root user 65532:65532, the platforms in one
// image index. Nothing in it depends on the time or the machine of the build:
// every timestamp is the one given (SOURCE_DATE_EPOCH), so the same binaries
// give the same digest.
//
// The guard needs nothing but its binary: it talks to the API server with the
// ServiceAccount's CA (no CA bundle), runs as a numeric user (no /etc/passwd)
// and writes no file (its root filesystem is read-only in config/manager).
package image

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

const (
	// Entrypoint is where the binary lives in the image, and what it runs.
	Entrypoint = "/webhook"
	// User is distroless' nonroot user, numeric so that the kubelet can
	// check runAsNonRoot without an /etc/passwd in the image.
	User = "65532:65532"
	// Repository is the image's name in config/default, and the one the
	// tarballs are tagged with when no other is given.
	Repository = "rollout-guard/webhook"
	// Source is the project's repository (org.opencontainers.image.source).
	Source = "https://github.com/rollout-guard/rollout-guard"
	// License is the SPDX identifier of the project's LICENSE.
	License = "Apache-2.0"
	// Title is org.opencontainers.image.title.
	Title = "rollout-guard webhook"
)

// Platforms are the platforms of the image, in the order of its index.
var Platforms = []string{"linux/amd64", "linux/arm64"}

// Options is what an image is built from.
type Options struct {
	// Binaries are the static webhook binaries, one per platform, in the
	// order of the index.
	Binaries []Binary
	// Version is org.opencontainers.image.version (and what the binaries
	// report with --version).
	Version string
	// Revision is the commit (org.opencontainers.image.revision); optional.
	Revision string
	// Created is every timestamp of the image: its config, its history,
	// its files and org.opencontainers.image.created.
	Created time.Time
}

// Binary is the webhook binary of one platform.
type Binary struct {
	Platform v1.Platform
	Path     string
}

// Labels are the image's OCI labels (on every platform's config, and as
// annotations of the index).
func Labels(o Options) map[string]string {
	l := map[string]string{
		"org.opencontainers.image.title":    Title,
		"org.opencontainers.image.source":   Source,
		"org.opencontainers.image.version":  o.Version,
		"org.opencontainers.image.licenses": License,
		"org.opencontainers.image.created":  o.Created.UTC().Format(time.RFC3339),
	}
	if o.Revision != "" {
		l["org.opencontainers.image.revision"] = o.Revision
	}
	return l
}

// Build makes the image index of o's binaries.
func Build(o Options) (v1.ImageIndex, error) {
	if len(o.Binaries) == 0 {
		return nil, fmt.Errorf("no binary to build an image of")
	}
	if o.Version == "" {
		return nil, fmt.Errorf("no version given")
	}
	idx := mutate.IndexMediaType(empty.Index, types.OCIImageIndex)
	for _, b := range o.Binaries {
		img, err := platformImage(b, o)
		if err != nil {
			return nil, fmt.Errorf("image for %s: %w", b.Platform, err)
		}
		p := b.Platform
		idx = mutate.AppendManifests(idx, mutate.IndexAddendum{
			Add:        img,
			Descriptor: v1.Descriptor{Platform: &p},
		})
	}
	return mutate.Annotations(idx, Labels(o)).(v1.ImageIndex), nil
}

// platformImage is the image of one platform: one layer with the binary.
func platformImage(b Binary, o Options) (v1.Image, error) {
	layer, err := binaryLayer(b.Path, o.Created)
	if err != nil {
		return nil, err
	}
	created := v1.Time{Time: o.Created.UTC()}
	img := mutate.ConfigMediaType(mutate.MediaType(empty.Image, types.OCIManifestSchema1), types.OCIConfigJSON)
	img, err = mutate.Append(img, mutate.Addendum{
		Layer:     layer,
		MediaType: types.OCILayer,
		History: v1.History{
			Created:   created,
			CreatedBy: "COPY webhook " + Entrypoint + " # hack/tools/image",
		},
	})
	if err != nil {
		return nil, err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	cf.OS = b.Platform.OS
	cf.Architecture = b.Platform.Architecture
	cf.Variant = b.Platform.Variant
	cf.Created = created
	cf.Config = v1.Config{
		User:       User,
		Entrypoint: []string{Entrypoint},
		Labels:     Labels(o),
	}
	return mutate.ConfigFile(img, cf)
}

// binaryLayer is a gzipped tar with the file at path as /webhook (root's,
// mode 0755, modified at created), compressed once and kept in memory.
func binaryLayer(path string, created time.Time) (v1.Layer, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var gz bytes.Buffer
	zw, err := gzip.NewWriterLevel(&gz, gzip.DefaultCompression)
	if err != nil {
		return nil, err
	}
	tw := tar.NewWriter(zw)
	hdr := &tar.Header{
		Typeflag: tar.TypeReg,
		Name:     Entrypoint[1:],
		Mode:     0o755,
		Size:     int64(len(data)),
		ModTime:  created.UTC(),
		Format:   tar.FormatPAX,
	}
	if err := tw.WriteHeader(hdr); err != nil {
		return nil, err
	}
	if _, err := tw.Write(data); err != nil {
		return nil, err
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	blob := gz.Bytes()
	return tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(blob)), nil
	}, tarball.WithMediaType(types.OCILayer))
}

// WriteLayout writes idx as the one image of a new OCI image layout in dir
// (whatever dir held before is removed), named ref.
func WriteLayout(dir string, idx v1.ImageIndex, ref name.Reference) error {
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		return err
	}
	return p.AppendIndex(idx, layout.WithAnnotations(map[string]string{
		"org.opencontainers.image.ref.name": ref.String(),
	}))
}

// ReadLayout returns the image index that WriteLayout wrote in dir.
func ReadLayout(dir string) (v1.ImageIndex, error) {
	root, err := layout.ImageIndexFromPath(dir)
	if err != nil {
		return nil, fmt.Errorf("reading the OCI layout %s: %w", dir, err)
	}
	m, err := root.IndexManifest()
	if err != nil {
		return nil, err
	}
	if len(m.Manifests) != 1 || m.Manifests[0].MediaType != types.OCIImageIndex {
		return nil, fmt.Errorf("the OCI layout %s holds %d manifests, not the one image index that hack/tools/image writes", dir, len(m.Manifests))
	}
	return root.ImageIndex(m.Manifests[0].Digest)
}

// TarballName is the name of the docker-save tarball of one platform.
func TarballName(version string, p v1.Platform) string {
	return fmt.Sprintf("webhook-image_%s_%s_%s.tar", version, p.OS, p.Architecture)
}

// WriteTarballs writes one tarball per platform of idx into dir, in the
// format of `docker save` (which `docker load` and containerd's
// `ctr images import` read), tagged tag, and returns their paths.
func WriteTarballs(dir string, idx v1.ImageIndex, tag name.Tag, version string) ([]string, error) {
	m, err := idx.IndexManifest()
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	var paths []string
	for _, desc := range m.Manifests {
		img, err := idx.Image(desc.Digest)
		if err != nil {
			return nil, err
		}
		path := filepath.Join(dir, TarballName(version, *desc.Platform))
		if err := tarball.WriteToFile(path, tag, img); err != nil {
			return nil, fmt.Errorf("writing %s: %w", path, err)
		}
		paths = append(paths, path)
	}
	return paths, nil
}

// Push pushes the image index in the OCI layout dir to ref and returns its
// digest.
func Push(ctx context.Context, dir string, ref name.Reference, opts ...remote.Option) (v1.Hash, error) {
	idx, err := ReadLayout(dir)
	if err != nil {
		return v1.Hash{}, err
	}
	digest, err := idx.Digest()
	if err != nil {
		return v1.Hash{}, err
	}
	if err := remote.WriteIndex(ref, idx, append([]remote.Option{remote.WithContext(ctx)}, opts...)...); err != nil {
		return v1.Hash{}, fmt.Errorf("pushing to %s: %w", ref, err)
	}
	return digest, nil
}

// Tag is the reference the image is known by: img when given (a repository
// and a tag; a repository alone is tagged with version), else
// rollout-guard/webhook:<version>.
func Tag(img, version string) (name.Tag, error) {
	if img == "" {
		img = Repository
	}
	if strings.Contains(img, "@") {
		return name.Tag{}, fmt.Errorf("IMG=%s names a digest: give a repository and a tag (registry.example.com/rollout-guard/webhook:%s)", img, version)
	}
	if repo, _ := splitTag(img); repo == img {
		img += ":" + version
	}
	tag, err := name.NewTag(img)
	if err != nil {
		return name.Tag{}, fmt.Errorf("IMG=%s: %w", img, err)
	}
	return tag, nil
}

// DigestReference is tag's repository, spelled as it was given, at digest:
// registry.example.com/rollout-guard/webhook@sha256:....
func DigestReference(tag name.Tag, digest v1.Hash) string {
	return RepositoryOf(tag.String()) + "@" + digest.String()
}

// RepositoryOf is ref without its tag, spelled as given.
func RepositoryOf(ref string) string {
	repo, _ := splitTag(ref)
	return repo
}

// splitTag splits an image reference into its repository and its tag (empty
// when it has none); a port in the registry's host is not a tag.
func splitTag(ref string) (repo, tag string) {
	slash := strings.LastIndex(ref, "/")
	if colon := strings.LastIndex(ref, ":"); colon > slash {
		return ref[:colon], ref[colon+1:]
	}
	return ref, ""
}
