package image

import (
	"archive/tar"
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rollout-guard/rollout-guard/hack/tools/internal/build"
)

var (
	root string
	// binaries are the webhook, built from the sources for every platform
	// of the image.
	binaries []Binary
	created  = time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	// built is the image of binaries with options(), written into an OCI
	// layout and read back from it, as make push reads it.
	built v1.ImageIndex
)

func TestMain(m *testing.M) {
	var err error
	if root, err = build.RepoRoot(); err != nil {
		log.Fatal(err)
	}
	platforms, err := build.Platforms(Platforms...)
	if err != nil {
		log.Fatal(err)
	}
	bins, err := build.ForTests(context.Background(), root, build.TestBinDir(root), "webhook", platforms, log.Printf)
	if err != nil {
		log.Fatal(err)
	}
	for _, b := range bins {
		binaries = append(binaries, Binary{Platform: b.Platform, Path: b.Path})
	}
	dir, err := os.MkdirTemp("", "image-test-")
	if err != nil {
		log.Fatal(err)
	}
	built, err = buildAndRead(filepath.Join(dir, "oci"))
	if err != nil {
		log.Fatal(err)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

func buildAndRead(dir string) (v1.ImageIndex, error) {
	idx, err := Build(options())
	if err != nil {
		return nil, err
	}
	tag, err := Tag("", build.TestVersion)
	if err != nil {
		return nil, err
	}
	if err := WriteLayout(dir, idx, tag); err != nil {
		return nil, err
	}
	return ReadLayout(dir)
}

func options() Options {
	return Options{Binaries: binaries, Version: build.TestVersion, Revision: "0123456789abcdef", Created: created}
}

func TestTheIndexHoldsOneImagePerPlatform(t *testing.T) {
	idx := built
	m, err := idx.IndexManifest()
	require.NoError(t, err)
	assert.Equal(t, types.OCIImageIndex, m.MediaType)
	var platforms []string
	for _, d := range m.Manifests {
		require.NotNil(t, d.Platform)
		platforms = append(platforms, d.Platform.String())
		assert.Equal(t, types.OCIManifestSchema1, d.MediaType)
	}
	assert.Equal(t, []string{"linux/amd64", "linux/arm64"}, platforms)
	assert.Equal(t, Labels(options()), m.Annotations, "the index carries the labels as annotations")
}

func TestEachImageIsTheBinaryAloneAsANonRootUser(t *testing.T) {
	idx := built
	m, err := idx.IndexManifest()
	require.NoError(t, err)
	for _, d := range m.Manifests {
		t.Run(d.Platform.String(), func(t *testing.T) {
			img, err := idx.Image(d.Digest)
			require.NoError(t, err)
			cf, err := img.ConfigFile()
			require.NoError(t, err)
			assert.Equal(t, d.Platform.OS, cf.OS)
			assert.Equal(t, d.Platform.Architecture, cf.Architecture)
			assert.Equal(t, "65532:65532", cf.Config.User)
			assert.Equal(t, []string{"/webhook"}, cf.Config.Entrypoint)
			assert.Empty(t, cf.Config.Cmd)
			assert.Empty(t, cf.Config.Env, "nothing to find on a PATH, no CA bundle to point at")
			assert.Equal(t, map[string]string{
				"org.opencontainers.image.title":    "rollout-guard webhook",
				"org.opencontainers.image.source":   "https://github.com/rollout-guard/rollout-guard",
				"org.opencontainers.image.version":  build.TestVersion,
				"org.opencontainers.image.revision": "0123456789abcdef",
				"org.opencontainers.image.licenses": "Apache-2.0",
				"org.opencontainers.image.created":  "2026-12-01T12:00:00Z",
			}, cf.Config.Labels)
			assert.Equal(t, created, cf.Created.Time)
			for _, h := range cf.History {
				assert.Equal(t, created, h.Created.Time)
			}

			layers, err := img.Layers()
			require.NoError(t, err)
			require.Len(t, layers, 1)
			mt, err := layers[0].MediaType()
			require.NoError(t, err)
			assert.Equal(t, types.OCILayer, mt)
			files := layerFiles(t, layers[0])
			require.Len(t, files, 1, "the binary and nothing else: %v", files)
			hdr := files["webhook"]
			require.NotNil(t, hdr, "no /webhook in %v", files)
			assert.Equal(t, byte(tar.TypeReg), hdr.Typeflag)
			assert.Equal(t, int64(0o755), hdr.Mode)
			assert.Equal(t, 0, hdr.Uid)
			assert.Equal(t, 0, hdr.Gid)
			assert.Equal(t, created, hdr.ModTime.UTC())
			for _, shell := range []string{"bin/sh", "bin/bash", "bin/busybox"} {
				assert.NotContains(t, files, shell)
			}

			// The binary is the one built, static: for the platform of this
			// machine, run it.
			data := layerFile(t, layers[0], "webhook")
			built, err := os.ReadFile(binaryOf(t, *d.Platform))
			require.NoError(t, err)
			assert.True(t, bytes.Equal(built, data), "the layer's /webhook is the binary built for %s", d.Platform)
			if d.Platform.OS == runtime.GOOS && d.Platform.Architecture == runtime.GOARCH {
				exe := filepath.Join(t.TempDir(), "webhook")
				require.NoError(t, os.WriteFile(exe, data, 0o755))
				out, err := exec.Command(exe, "--version").Output()
				require.NoError(t, err)
				assert.Equal(t, build.TestVersion, strings.TrimSpace(string(out)))
			}
		})
	}
}

func TestTheImageIsReproducible(t *testing.T) {
	again, err := Build(options())
	require.NoError(t, err)
	assert.Equal(t, digestOf(t, built), digestOf(t, again),
		"the same binaries and options give the same digest, before and after a trip through the OCI layout")

	// Every timestamp is the one given: another one, another digest (with
	// small stand-ins for the binaries, which do not matter here).
	o := options()
	o.Binaries = nil
	for _, b := range binaries {
		path := filepath.Join(t.TempDir(), "webhook")
		require.NoError(t, os.WriteFile(path, []byte(b.Platform.String()), 0o755))
		o.Binaries = append(o.Binaries, Binary{Platform: b.Platform, Path: path})
	}
	small, err := Build(o)
	require.NoError(t, err)
	smallAgain, err := Build(o)
	require.NoError(t, err)
	assert.Equal(t, digestOf(t, small), digestOf(t, smallAgain))
	o.Created = created.Add(time.Second)
	later, err := Build(o)
	require.NoError(t, err)
	assert.NotEqual(t, digestOf(t, small), digestOf(t, later))
}

func TestTarballsForContainerdAndDocker(t *testing.T) {
	idx := built
	tag, err := Tag("registry.example.com/rollout-guard/webhook:v9", build.TestVersion)
	require.NoError(t, err)
	dir := t.TempDir()
	paths, err := WriteTarballs(dir, idx, tag, build.TestVersion)
	require.NoError(t, err)
	require.Equal(t, []string{
		filepath.Join(dir, "webhook-image_"+build.TestVersion+"_linux_amd64.tar"),
		filepath.Join(dir, "webhook-image_"+build.TestVersion+"_linux_arm64.tar"),
	}, paths)
	m, err := idx.IndexManifest()
	require.NoError(t, err)
	for i, path := range paths {
		want, err := idx.Image(m.Manifests[i].Digest)
		require.NoError(t, err)
		manifest, err := tarball.LoadManifest(func() (io.ReadCloser, error) { return os.Open(path) })
		require.NoError(t, err)
		require.Len(t, manifest, 1)
		assert.Equal(t, []string{"registry.example.com/rollout-guard/webhook:v9"}, manifest[0].RepoTags)
		got, err := tarball.ImageFromPath(path, &tag)
		require.NoError(t, err)
		for _, f := range []func(v1.Image) (v1.Hash, error){
			func(i v1.Image) (v1.Hash, error) { return i.ConfigName() },
			func(i v1.Image) (v1.Hash, error) {
				ls, err := i.Layers()
				if err != nil {
					return v1.Hash{}, err
				}
				return ls[0].Digest()
			},
		} {
			w, err := f(want)
			require.NoError(t, err)
			g, err := f(got)
			require.NoError(t, err)
			assert.Equal(t, w, g, "%s holds the config and the layer of the index's %s image", path, m.Manifests[i].Platform)
		}
	}
}

func TestPushWritesTheIndexToTheRegistry(t *testing.T) {
	t.Setenv("DOCKER_CONFIG", t.TempDir()) // no credentials of this machine
	srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	defer srv.Close()
	tag, err := Tag("", build.TestVersion)
	require.NoError(t, err)
	idx := built
	dir := filepath.Join(t.TempDir(), "oci")
	require.NoError(t, WriteLayout(dir, idx, tag))

	ref, err := name.ParseReference(strings.TrimPrefix(srv.URL, "http://") + "/rollout-guard/webhook:" + build.TestVersion)
	require.NoError(t, err)
	pushed, err := Push(context.Background(), dir, ref)
	require.NoError(t, err)
	assert.Equal(t, digestOf(t, idx), pushed)

	got, err := remote.Index(ref)
	require.NoError(t, err)
	assert.Equal(t, pushed, digestOf(t, got), "the registry serves the index at the tag")
	m, err := got.IndexManifest()
	require.NoError(t, err)
	require.Len(t, m.Manifests, 2)
	img, err := got.Image(m.Manifests[1].Digest)
	require.NoError(t, err)
	cf, err := img.ConfigFile()
	require.NoError(t, err)
	assert.Equal(t, "arm64", cf.Architecture)
}

func TestReadLayoutRefusesWhatIsNotAnImage(t *testing.T) {
	_, err := ReadLayout(t.TempDir())
	assert.ErrorContains(t, err, "reading the OCI layout")
}

func TestTag(t *testing.T) {
	for _, c := range []struct{ img, want string }{
		{"", "rollout-guard/webhook:v1.2.3"},
		{"registry.example.com/rollout-guard/webhook", "registry.example.com/rollout-guard/webhook:v1.2.3"},
		{"registry.example.com:5000/guard", "registry.example.com:5000/guard:v1.2.3"},
		{"registry.example.com:5000/guard:rc1", "registry.example.com:5000/guard:rc1"},
	} {
		tag, err := Tag(c.img, "v1.2.3")
		require.NoError(t, err, c.img)
		assert.Equal(t, c.want, tag.String(), c.img)
	}
	_, err := Tag("registry.example.com/guard@sha256:"+strings.Repeat("0", 64), "v1.2.3")
	assert.ErrorContains(t, err, "names a digest")
	_, err = Tag("Registry/UPPER", "v1.2.3")
	assert.Error(t, err)

	tag, err := Tag("registry.example.com:5000/guard:rc1", "v1.2.3")
	require.NoError(t, err)
	h := v1.Hash{Algorithm: "sha256", Hex: strings.Repeat("a", 64)}
	assert.Equal(t, "registry.example.com:5000/guard@sha256:"+h.Hex, DigestReference(tag, h))
}

// TestTheDockerfileBuildsTheSameContents: the Dockerfile, for those with a
// container engine, makes an image of the same contents as this builder: an
// empty base, the static binary built the same way at the same path, the same
// user, entry point and labels (the builder adds the revision and the
// creation time, which a Dockerfile build does not know).
func TestTheDockerfileBuildsTheSameContents(t *testing.T) {
	f, err := os.Open(filepath.Join(root, "Dockerfile"))
	require.NoError(t, err)
	defer f.Close()
	var ins []string
	var cur strings.Builder
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if cont, ok := strings.CutSuffix(line, `\`); ok {
			cur.WriteString(strings.TrimSpace(cont) + " ")
			continue
		}
		cur.WriteString(line)
		ins = append(ins, cur.String())
		cur.Reset()
	}
	require.NoError(t, sc.Err())
	// The last stage: from its FROM on.
	last := 0
	for i, in := range ins {
		if strings.HasPrefix(in, "FROM ") {
			last = i
		}
	}
	final := ins[last:]
	assert.Equal(t, "FROM scratch", final[0])
	assert.Contains(t, final, "COPY --from=builder /out/webhook "+Entrypoint)
	assert.Contains(t, final, "USER "+User)
	entry, _ := json.Marshal([]string{Entrypoint})
	assert.Contains(t, final, "ENTRYPOINT "+string(entry))
	var copies int
	labels := map[string]string{}
	for _, in := range final {
		if strings.HasPrefix(in, "COPY ") || strings.HasPrefix(in, "ADD ") || strings.HasPrefix(in, "RUN ") {
			copies++
		}
		if rest, ok := strings.CutPrefix(in, "LABEL "); ok {
			for _, kv := range regexp.MustCompile(`(\S+)="([^"]*)"`).FindAllStringSubmatch(rest, -1) {
				labels[kv[1]] = kv[2]
			}
		}
	}
	assert.Equal(t, 1, copies, "the final stage adds the binary and nothing else")
	want := Labels(Options{Version: "${VERSION}"})
	delete(want, "org.opencontainers.image.created")
	assert.Equal(t, want, labels)

	var goBuild string
	for _, in := range ins {
		if strings.HasPrefix(in, "RUN ") && strings.Contains(in, "go build") {
			goBuild = in
		}
	}
	for _, flag := range []string{"CGO_ENABLED=0", "go build -trimpath", `-ldflags "-X main.version=${VERSION}"`} {
		assert.Contains(t, goBuild, flag, "the Dockerfile builds the binary as hack/tools/internal/build does")
	}
}

func binaryOf(t *testing.T, p v1.Platform) string {
	t.Helper()
	for _, b := range binaries {
		if b.Platform.String() == p.String() {
			return b.Path
		}
	}
	t.Fatalf("no binary for %s", p)
	return ""
}

func digestOf(t *testing.T, idx v1.ImageIndex) v1.Hash {
	t.Helper()
	d, err := idx.Digest()
	require.NoError(t, err)
	return d
}

// layerFiles lists the entries of a layer by name.
func layerFiles(t *testing.T, l v1.Layer) map[string]*tar.Header {
	t.Helper()
	rc, err := l.Uncompressed()
	require.NoError(t, err)
	defer rc.Close()
	files := map[string]*tar.Header{}
	tr := tar.NewReader(rc)
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			return files
		}
		require.NoError(t, err)
		files[strings.TrimPrefix(hdr.Name, "/")] = hdr
	}
}

// layerFile is the content of one file of a layer.
func layerFile(t *testing.T, l v1.Layer, name string) []byte {
	t.Helper()
	rc, err := l.Uncompressed()
	require.NoError(t, err)
	defer rc.Close()
	tr := tar.NewReader(rc)
	for {
		hdr, err := tr.Next()
		require.NoError(t, err, fmt.Sprintf("looking for %s", name))
		if hdr.Name == name {
			data, err := io.ReadAll(tr)
			require.NoError(t, err)
			return data
		}
	}
}
