package main

import (
	"archive/tar"
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"io"
	"log"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/krew/pkg/index"
	"sigs.k8s.io/yaml"

	"github.com/rollout-guard/rollout-guard/hack/tools/internal/build"
	"github.com/rollout-guard/rollout-guard/hack/tools/internal/image"
)

const testImg = "registry.example.com/rollout-guard/webhook:" + build.TestVersion

var (
	root, toolsDir string
	// bins are every binary of a release, built from the sources.
	bins Binaries
	// release is the options of the release every test reads, written once
	// into a temporary directory.
	release Options
)

func TestMain(m *testing.M) {
	var err error
	if root, err = build.RepoRoot(); err != nil {
		log.Fatal(err)
	}
	toolsDir = filepath.Join(root, "hack", "tools")
	tmp, err := os.MkdirTemp("", "release-test-")
	if err != nil {
		log.Fatal(err)
	}
	release = Options{
		Root: root, ToolsDir: toolsDir, Version: build.TestVersion, Img: testImg,
		Out: filepath.Join(tmp, "dist"), BinDir: build.TestBinDir(root), ImageDir: filepath.Join(tmp, "image"),
		Revision: "0123456789abcdef", Created: time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC),
		DownloadURL: "https://example.com/releases/" + build.TestVersion,
		Log:         log.Printf,
	}
	ctx := context.Background()
	// The machine's own build stands in for the other platforms
	// (build.ForTests): these tests check the packaging.
	for _, c := range []struct {
		command   string
		platforms []string
		into      *[]build.Binary
	}{{"webhook", image.Platforms, &bins.Webhook}, {"rollout", CLIPlatforms, &bins.Rollout}} {
		platforms, err := build.Platforms(c.platforms...)
		if err != nil {
			log.Fatal(err)
		}
		if *c.into, err = build.ForTests(ctx, root, release.BinDir, c.command, platforms, log.Printf); err != nil {
			log.Fatal(err)
		}
	}
	start := time.Now()
	if err := Assemble(ctx, release, bins); err != nil {
		log.Fatal(err)
	}
	log.Printf("assembled the release in %.1fs", time.Since(start).Seconds())
	code := m.Run()
	os.RemoveAll(tmp)
	os.Exit(code)
}

func TestTheReleaseHoldsEveryFileWithItsChecksum(t *testing.T) {
	v := build.TestVersion
	want := []string{
		"SHA256SUMS",
		"capi-rollout.yaml",
		"install.yaml",
		"rollout_" + v + "_darwin_amd64.tar.gz",
		"rollout_" + v + "_darwin_arm64.tar.gz",
		"rollout_" + v + "_linux_amd64.tar.gz",
		"rollout_" + v + "_linux_arm64.tar.gz",
		"webhook-image_" + v + "_linux_amd64.tar",
		"webhook-image_" + v + "_linux_arm64.tar",
	}
	entries, err := os.ReadDir(release.Out)
	require.NoError(t, err)
	var got []string
	for _, e := range entries {
		got = append(got, e.Name())
	}
	assert.Equal(t, want, got)

	sums, err := os.Open(filepath.Join(release.Out, SumsFile))
	require.NoError(t, err)
	defer sums.Close()
	var listed []string
	sc := bufio.NewScanner(sums)
	for sc.Scan() {
		sum, file, ok := strings.Cut(sc.Text(), "  ")
		require.True(t, ok, "a line of sha256sum: %q", sc.Text())
		actual, err := fileSHA256(filepath.Join(release.Out, file))
		require.NoError(t, err, "%s is listed in SHA256SUMS", file)
		assert.Equal(t, actual, sum, file)
		listed = append(listed, file)
	}
	require.NoError(t, sc.Err())
	assert.Equal(t, slices.DeleteFunc(slices.Clone(want), func(f string) bool { return f == SumsFile }), listed,
		"SHA256SUMS lists every other file")

	if sha256sum, err := exec.LookPath("sha256sum"); err == nil {
		cmd := exec.Command(sha256sum, "--check", "--strict", SumsFile)
		cmd.Dir = release.Out
		out, err := cmd.CombinedOutput()
		assert.NoError(t, err, "sha256sum -c: %s", out)
	}
}

func TestInstallYAMLPointsAtTheImageDigest(t *testing.T) {
	idx, err := image.ReadLayout(filepath.Join(release.ImageDir, "oci"))
	require.NoError(t, err)
	digest, err := idx.Digest()
	require.NoError(t, err)
	data, err := os.ReadFile(filepath.Join(release.Out, InstallFile))
	require.NoError(t, err)
	objs := decodeYAML(t, data)

	require.NotEmpty(t, objs)
	assert.Equal(t, "Namespace", objs[0].GetKind(), "kubectl apply -f creates the namespace first")
	last := []string{objs[len(objs)-2].GetKind(), objs[len(objs)-1].GetKind()}
	assert.ElementsMatch(t, []string{"MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"}, last, "and registers the webhooks last")
	kinds := map[string]int{}
	var deployments []*unstructured.Unstructured
	for _, o := range objs {
		kinds[o.GetKind()]++
		if o.GetKind() == "Deployment" {
			deployments = append(deployments, o)
		}
	}
	for _, k := range []string{"Namespace", "ServiceAccount", "ClusterRole", "Service", "ValidatingWebhookConfiguration", "MutatingWebhookConfiguration", "Certificate", "Issuer"} {
		assert.Positive(t, kinds[k], "install.yaml has a %s (config/default with cert-manager)", k)
	}
	require.Len(t, deployments, 1)
	assert.Equal(t, []string{"registry.example.com/rollout-guard/webhook@" + digest.String()}, images(t, deployments[0]),
		"the image asked for, at the digest of the image built")
}

func TestInstallYAMLWithoutARegistry(t *testing.T) {
	tag, err := image.Tag("", "v1.2.3")
	require.NoError(t, err)
	data, err := RenderInstall(root, tag.String())
	require.NoError(t, err)
	for _, o := range decodeYAML(t, data) {
		if o.GetKind() == "Deployment" {
			assert.Equal(t, []string{"rollout-guard/webhook:v1.2.3"}, images(t, o), "the tag the image's tarballs carry")
		}
	}
}

func TestTheArchivesHoldTheBinaryAndTheLicense(t *testing.T) {
	license, err := os.ReadFile(filepath.Join(root, "LICENSE"))
	require.NoError(t, err)
	require.Contains(t, string(license), "Apache License")
	for _, b := range bins.Rollout {
		t.Run(b.Platform.String(), func(t *testing.T) {
			files := readArchive(t, filepath.Join(release.Out, ArchiveName(release.Version, b.Platform)))
			require.Len(t, files, 2)
			built, err := os.ReadFile(b.Path)
			require.NoError(t, err)
			assert.True(t, bytes.Equal(built, files["rollout"]), "the archive's rollout is the binary built for %s", b.Platform)
			assert.Equal(t, license, files["LICENSE"])
		})
	}
}

func TestTheArchivesAreReproducible(t *testing.T) {
	// A small stand-in for the binary: its size does not matter here.
	bin := filepath.Join(t.TempDir(), "rollout")
	require.NoError(t, os.WriteFile(bin, []byte("#!/bin/true\n"), 0o755))
	license := []byte("license")
	var sums []string
	for range 2 {
		path := filepath.Join(t.TempDir(), "a.tar.gz")
		require.NoError(t, writeArchive(path, bin, license, release.Created))
		sum, err := fileSHA256(path)
		require.NoError(t, err)
		sums = append(sums, sum)
	}
	assert.Equal(t, sums[0], sums[1])
}

func TestTheKrewManifestInstallsAsAKubectlPlugin(t *testing.T) {
	manifest := filepath.Join(release.Out, PluginName+".yaml")
	data, err := os.ReadFile(manifest)
	require.NoError(t, err)
	var p index.Plugin
	require.NoError(t, yaml.UnmarshalStrict(data, &p))
	assert.Equal(t, "capi-rollout", p.Name)
	assert.Equal(t, build.TestVersion, p.Spec.Version)
	var platforms []string
	for _, pl := range p.Spec.Platforms {
		platform := pl.Selector.MatchLabels["os"] + "/" + pl.Selector.MatchLabels["arch"]
		platforms = append(platforms, platform)
		name := "rollout_" + build.TestVersion + "_" + strings.ReplaceAll(platform, "/", "_") + ".tar.gz"
		assert.Equal(t, release.DownloadURL+"/"+name, pl.URI)
		sum, err := fileSHA256(filepath.Join(release.Out, name))
		require.NoError(t, err)
		assert.Equal(t, sum, pl.Sha256, platform)
		assert.Equal(t, "rollout", pl.Bin)
	}
	assert.Equal(t, CLIPlatforms, platforms)

	// krew installs it (as Assemble checked on every platform) and kubectl
	// would run it as `kubectl capi-rollout`.
	platform := runtime.GOOS + "/" + runtime.GOARCH
	if !slices.Contains(CLIPlatforms, platform) {
		t.Skipf("no archive for %s", platform)
	}
	krewRoot := t.TempDir()
	archive := filepath.Join(release.Out, "rollout_"+build.TestVersion+"_"+runtime.GOOS+"_"+runtime.GOARCH+".tar.gz")
	require.NoError(t, KrewInstall(context.Background(), toolsDir, krewRoot, manifest, archive, platform))
	plugin := filepath.Join(krewRoot, "bin", "kubectl-capi_rollout")
	out, err := exec.Command(plugin, "version").Output()
	require.NoError(t, err)
	assert.Equal(t, build.TestVersion, strings.TrimSpace(string(out)))
	out, err = exec.Command(plugin, "history", "--help").Output()
	require.NoError(t, err)
	assert.Contains(t, string(out), "kubectl capi-rollout history KIND/NAME", "the CLI names itself as kubectl runs it")
}

// TestKrewRefusesABrokenManifest: the validation that passes the release's
// manifest refuses broken ones.
func TestKrewRefusesABrokenManifest(t *testing.T) {
	manifest := filepath.Join(release.Out, PluginName+".yaml")
	data, err := os.ReadFile(manifest)
	require.NoError(t, err)
	var valid index.Plugin
	require.NoError(t, yaml.Unmarshal(data, &valid))
	archive := filepath.Join(release.Out, ArchiveName(release.Version, bins.Rollout[0].Platform))

	for _, c := range []struct {
		name   string
		break_ func(p *index.Plugin)
		want   string
		// archives, when set, are installed with krew too.
		archives map[string]string
	}{
		{"a sha256 in capitals", func(p *index.Plugin) { p.Spec.Platforms[0].Sha256 = strings.ToUpper(p.Spec.Platforms[0].Sha256) }, "is not valid", nil},
		{"a sha256 cut short", func(p *index.Plugin) { p.Spec.Platforms[1].Sha256 = p.Spec.Platforms[1].Sha256[:63] }, "is not valid", nil},
		{"a platform without a selector", func(p *index.Plugin) { p.Spec.Platforms[2].Selector = nil }, "nil selector", nil},
		{"a selector of another key", func(p *index.Plugin) { p.Spec.Platforms[0].Selector.MatchLabels["libc"] = "musl" }, `key "libc" not supported`, nil},
		{"two platforms for one", func(p *index.Plugin) { p.Spec.Platforms[1].Selector = p.Spec.Platforms[0].Selector }, "overlapping", nil},
		{"a platform krew does not know", func(p *index.Plugin) { p.Spec.Platforms[3].Selector.MatchLabels["os"] = "plan9" }, "doesn't match any supported platforms", nil},
		{"no version", func(p *index.Plugin) { p.Spec.Version = "" }, "should have a version", nil},
		{"another name than its file", func(p *index.Plugin) { p.Name = "rollout" }, "plugin should be named", nil},
		{"the sha256 of another archive", func(p *index.Plugin) { p.Spec.Platforms[0].Sha256 = p.Spec.Platforms[1].Sha256 }, "checksum does not match",
			map[string]string{bins.Rollout[0].Platform.String(): archive}},
	} {
		t.Run(c.name, func(t *testing.T) {
			var p index.Plugin
			require.NoError(t, yaml.Unmarshal(data, &p))
			c.break_(&p)
			broken, err := yaml.Marshal(p)
			require.NoError(t, err)
			path := filepath.Join(t.TempDir(), PluginName+".yaml")
			require.NoError(t, os.WriteFile(path, broken, 0o644))
			err = ValidateKrewManifest(context.Background(), toolsDir, path, c.archives)
			require.Error(t, err)
			assert.Contains(t, err.Error(), c.want)
		})
	}
}

func TestCheckVersion(t *testing.T) {
	for _, v := range []string{"v0.1.0", "v1.22.333", "v0.2.0-rc.1"} {
		assert.NoError(t, CheckVersion(v), v)
	}
	for _, v := range []string{"", "0.1.0", "v0.1", "605a503-dirty", "v0.1.0+meta", "v01.1.0"} {
		assert.ErrorContains(t, CheckVersion(v), "make release VERSION=v0.1.0", v)
	}
}

func decodeYAML(t *testing.T, data []byte) []*unstructured.Unstructured {
	t.Helper()
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	var objs []*unstructured.Unstructured
	for {
		var m map[string]any
		err := dec.Decode(&m)
		if errors.Is(err, io.EOF) {
			return objs
		}
		require.NoError(t, err)
		if m != nil {
			objs = append(objs, &unstructured.Unstructured{Object: m})
		}
	}
}

func images(t *testing.T, deployment *unstructured.Unstructured) []string {
	t.Helper()
	containers, _, err := unstructured.NestedSlice(deployment.Object, "spec", "template", "spec", "containers")
	require.NoError(t, err)
	var out []string
	for _, c := range containers {
		out = append(out, c.(map[string]any)["image"].(string))
	}
	return out
}

// readArchive returns the files of a .tar.gz by name, checking their modes.
func readArchive(t *testing.T, path string) map[string][]byte {
	t.Helper()
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	zr, err := gzip.NewReader(f)
	require.NoError(t, err)
	tr := tar.NewReader(zr)
	files := map[string][]byte{}
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			return files
		}
		require.NoError(t, err)
		want := int64(0o644)
		if hdr.Name == "rollout" {
			want = 0o755
		}
		assert.Equal(t, want, hdr.Mode, hdr.Name)
		data, err := io.ReadAll(tr)
		require.NoError(t, err)
		files[hdr.Name] = data
	}
}
