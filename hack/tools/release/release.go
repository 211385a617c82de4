package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/krew/pkg/constants"
	"sigs.k8s.io/krew/pkg/index"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"

	"github.com/rollout-guard/rollout-guard/hack/tools/internal/build"
	"github.com/rollout-guard/rollout-guard/hack/tools/internal/image"
)

// PluginName is the CLI's name as a krew plugin, and so as a kubectl
// subcommand: `kubectl capi-rollout history md/md-0`. Not `rollout`: kubectl
// runs its built-in `kubectl rollout` and never a plugin of that name (nor
// `rollout-...` ones under it, which kubectl would read as `kubectl rollout
// ...`); `capi-` says what it rolls out, Cluster API objects.
const PluginName = "capi-rollout"

// CLIPlatforms are the platforms the rollout CLI is released for.
var CLIPlatforms = []string{"linux/amd64", "linux/arm64", "darwin/amd64", "darwin/arm64"}

// SumsFile is the name of the checksum file, in the format of sha256sum.
const SumsFile = "SHA256SUMS"

// InstallFile is the name of the rendered manifests.
const InstallFile = "install.yaml"

// Options is what a release is made of.
type Options struct {
	// Root is the repository's root; ToolsDir the hack/tools module, whose
	// go.mod pins krew (its validation and installer are run as `go tool`).
	Root, ToolsDir string
	// Version is the release's version, v-prefixed semver (v0.1.0).
	Version string
	// Img is the registry and repository the image will be pushed to (with a
	// tag or not); empty for an image imported from its tarballs.
	Img string
	// Out is the release's directory (emptied first); BinDir where the
	// binaries are built; ImageDir, when set, gets the image's OCI layout
	// (ImageDir/oci, what make push pushes).
	Out, BinDir, ImageDir string
	// Revision is the commit; Created every timestamp of the image and the
	// archives.
	Revision string
	Created  time.Time
	// DownloadURL is where the archives will be published: the krew
	// manifest's URIs are DownloadURL/<archive>.
	DownloadURL string
	// Log, when set, is told what is done.
	Log func(format string, args ...any)
}

func (o Options) logf(format string, args ...any) {
	if o.Log != nil {
		o.Log(format, args...)
	}
}

// Binaries are the binaries of a release.
type Binaries struct {
	Webhook, Rollout []build.Binary
}

var semverRE = regexp.MustCompile(`^v(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)(-[0-9A-Za-z.-]+)?$`)

// CheckVersion refuses a version that is not v-prefixed semver (krew's
// manifest needs one, and a tag is made of it).
func CheckVersion(v string) error {
	if !semverRE.MatchString(v) {
		return fmt.Errorf("VERSION=%q is not a release version: give a v-prefixed semantic version, e.g. make release VERSION=v0.1.0", v)
	}
	return nil
}

// Run builds the binaries and writes the release.
func Run(ctx context.Context, o Options) error {
	if err := CheckVersion(o.Version); err != nil {
		return err
	}
	bins, err := BuildBinaries(ctx, o)
	if err != nil {
		return err
	}
	return Assemble(ctx, o, bins)
}

// BuildBinaries cross-compiles the webhook for the image's platforms and
// rollout for CLIPlatforms.
func BuildBinaries(ctx context.Context, o Options) (Binaries, error) {
	var bins Binaries
	for _, c := range []struct {
		command   string
		platforms []string
		into      *[]build.Binary
	}{{"webhook", image.Platforms, &bins.Webhook}, {"rollout", CLIPlatforms, &bins.Rollout}} {
		platforms, err := build.Platforms(c.platforms...)
		if err != nil {
			return bins, err
		}
		for _, p := range platforms {
			b, err := build.Command(ctx, o.Root, o.BinDir, c.command, o.Version, p, o.Log)
			if err != nil {
				return bins, err
			}
			*c.into = append(*c.into, b)
		}
	}
	return bins, nil
}

// Assemble writes the release of bins into o.Out: the image's tarballs,
// install.yaml, the CLI's archives, the krew manifest (checked with krew's
// own validation and installer) and SHA256SUMS.
func Assemble(ctx context.Context, o Options, bins Binaries) error {
	if err := CheckVersion(o.Version); err != nil {
		return err
	}
	if err := os.RemoveAll(o.Out); err != nil {
		return err
	}
	if err := os.MkdirAll(o.Out, 0o755); err != nil {
		return err
	}

	// The image.
	imgOpts := image.Options{Version: o.Version, Revision: o.Revision, Created: o.Created}
	for _, b := range bins.Webhook {
		imgOpts.Binaries = append(imgOpts.Binaries, image.Binary{Platform: b.Platform, Path: b.Path})
	}
	idx, err := image.Build(imgOpts)
	if err != nil {
		return err
	}
	digest, err := idx.Digest()
	if err != nil {
		return err
	}
	tag, err := image.Tag(o.Img, o.Version)
	if err != nil {
		return err
	}
	if o.ImageDir != "" {
		if err := image.WriteLayout(filepath.Join(o.ImageDir, "oci"), idx, tag); err != nil {
			return err
		}
	}
	if _, err := image.WriteTarballs(o.Out, idx, tag, o.Version); err != nil {
		return err
	}
	o.logf("image index %s", digest)

	// install.yaml: at the digest in the registry it will be pushed to, or
	// at the tag its tarballs carry.
	ref := tag.String()
	if o.Img != "" {
		ref = image.DigestReference(tag, digest)
	}
	manifests, err := RenderInstall(o.Root, ref)
	if err != nil {
		return err
	}
	header := fmt.Sprintf("# rollout-guard %s: the guard with cert-manager (config/default), image %s.\n# kubectl apply -f install.yaml (docs/install.md)\n", o.Version, ref)
	if err := os.WriteFile(filepath.Join(o.Out, InstallFile), append([]byte(header), manifests...), 0o644); err != nil {
		return err
	}
	o.logf("%s: image %s", InstallFile, ref)

	// The CLI's archives and their krew manifest.
	license, err := os.ReadFile(filepath.Join(o.Root, "LICENSE"))
	if err != nil {
		return err
	}
	archives := map[string]string{}
	var platforms []index.Platform
	for _, b := range bins.Rollout {
		name := ArchiveName(o.Version, b.Platform)
		path := filepath.Join(o.Out, name)
		if err := writeArchive(path, b.Path, license, o.Created); err != nil {
			return err
		}
		sum, err := fileSHA256(path)
		if err != nil {
			return err
		}
		archives[b.Platform.String()] = path
		platforms = append(platforms, index.Platform{
			URI:    strings.TrimSuffix(o.DownloadURL, "/") + "/" + name,
			Sha256: sum,
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{
				"os": b.Platform.OS, "arch": b.Platform.Architecture,
			}},
			Files: []index.FileOperation{{From: "rollout", To: "."}, {From: "LICENSE", To: "."}},
			Bin:   "rollout",
		})
	}
	manifest := filepath.Join(o.Out, PluginName+constants.ManifestExtension)
	if err := writeKrewManifest(manifest, o.Version, platforms); err != nil {
		return err
	}
	if err := ValidateKrewManifest(ctx, o.ToolsDir, manifest, archives); err != nil {
		return err
	}
	o.logf("%s: valid, and each of its %d archives installs with krew", filepath.Base(manifest), len(archives))

	return WriteSums(o.Out)
}

// ArchiveName is the name of the CLI's archive for platform p.
func ArchiveName(version string, p v1.Platform) string {
	return fmt.Sprintf("rollout_%s_%s_%s.tar.gz", version, p.OS, p.Architecture)
}

// RenderInstall renders config/default with kustomize's Go API, as `kubectl
// kustomize` does, its image set to ref.
func RenderInstall(root, ref string) ([]byte, error) {
	dir, err := os.MkdirTemp("", "rollout-guard-install-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	base, err := filepath.Rel(dir, filepath.Join(root, "config", "default"))
	if err != nil {
		return nil, err
	}
	img := map[string]string{"name": image.Repository}
	if repo, digest, ok := strings.Cut(ref, "@"); ok {
		img["newName"], img["digest"] = repo, digest
	} else {
		img["newName"] = image.RepositoryOf(ref)
		img["newTag"] = strings.TrimPrefix(ref, img["newName"]+":")
	}
	k, err := yaml.Marshal(map[string]any{
		"apiVersion": "kustomize.config.k8s.io/v1beta1",
		"kind":       "Kustomization",
		"resources":  []string{filepath.ToSlash(base)},
		"images":     []map[string]string{img},
	})
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(dir, "kustomization.yaml"), k, 0o644); err != nil {
		return nil, err
	}
	// In kustomize's legacy order, as `kubectl kustomize` sorts: the
	// Namespace first, the webhook configurations last, so that `kubectl
	// apply -f` creates every object in one pass.
	opts := krusty.MakeDefaultOptions()
	opts.Reorder = krusty.ReorderOptionLegacy
	resMap, err := krusty.MakeKustomizer(opts).Run(filesys.MakeFsOnDisk(), dir)
	if err != nil {
		return nil, fmt.Errorf("kustomize build config/default: %w", err)
	}
	return resMap.AsYaml()
}

// writeArchive writes a gzipped tar of the binary at bin (as rollout) and
// the license (as LICENSE), root's, modified at created.
func writeArchive(path, bin string, license []byte, created time.Time) error {
	data, err := os.ReadFile(bin)
	if err != nil {
		return err
	}
	var buf bytes.Buffer
	zw, err := gzip.NewWriterLevel(&buf, gzip.DefaultCompression)
	if err != nil {
		return err
	}
	tw := tar.NewWriter(zw)
	for _, f := range []struct {
		name string
		mode int64
		data []byte
	}{{"rollout", 0o755, data}, {"LICENSE", 0o644, license}} {
		if err := tw.WriteHeader(&tar.Header{
			Typeflag: tar.TypeReg, Name: f.name, Mode: f.mode, Size: int64(len(f.data)),
			ModTime: created.UTC(), Format: tar.FormatPAX,
		}); err != nil {
			return err
		}
		if _, err := tw.Write(f.data); err != nil {
			return err
		}
	}
	if err := tw.Close(); err != nil {
		return err
	}
	if err := zw.Close(); err != nil {
		return err
	}
	return os.WriteFile(path, buf.Bytes(), 0o644)
}

func writeKrewManifest(path, version string, platforms []index.Platform) error {
	p := index.Plugin{
		TypeMeta:   metav1.TypeMeta{APIVersion: constants.CurrentAPIVersion, Kind: constants.PluginKind},
		ObjectMeta: metav1.ObjectMeta{Name: PluginName},
		Spec: index.PluginSpec{
			Version:          version,
			Homepage:         image.Source,
			ShortDescription: "Roll out, undo and inspect Cluster API control planes and workers",
			Description: `Rolls out Cluster API MachineDeployments, KubeadmControlPlanes and whole
Clusters (ClusterClass upgrades included) the way kubectl rollout does
Deployments: restart, pause, resume, status, history, undo, a switch of
machine template or Kubernetes version, and plan, which previews what a
change would do (machines replaced, steps, refusals) before it is made.
Changes are checked against rollout-guard's version-skew and etcd-downgrade
policy before they are sent.
`,
			Caveats: `history and undo read the revisions that rollout-guard's admission webhook
records in the management cluster: install it there first (install.yaml of
the same release, docs/install.md).
`,
			Platforms: platforms,
		},
	}
	data, err := yaml.Marshal(p)
	if err != nil {
		return err
	}
	return os.WriteFile(path, data, 0o644)
}

// ValidateKrewManifest checks the krew manifest at path as the krew index
// checks a plugin: krew's validate-krew-manifest (its structural validation,
// every platform selector matches a platform krew supports, no two overlap),
// then krew's installer on each archive given (by os/arch) with that
// platform's selector, in a throw-away krew root: the sha256 matches, the
// files exist, the binary is linked and a LICENSE is installed.
func ValidateKrewManifest(ctx context.Context, toolsDir, path string, archives map[string]string) error {
	if out, err := goTool(ctx, toolsDir, nil, "validate-krew-manifest", "-manifest", path, "-skip-install"); err != nil {
		return fmt.Errorf("krew refuses %s: %w\n%s", path, err, out)
	}
	for _, platform := range slices.Sorted(maps.Keys(archives)) {
		root, err := os.MkdirTemp("", "krew-")
		if err != nil {
			return err
		}
		err = KrewInstall(ctx, toolsDir, root, path, archives[platform], platform)
		os.RemoveAll(root)
		if err != nil {
			return err
		}
	}
	return nil
}

// KrewInstall installs the plugin of the manifest at path from archive, as
// krew does on platform (os/arch), into the krew root, and checks that its
// binary and its LICENSE are there.
func KrewInstall(ctx context.Context, toolsDir, root, path, archive, platform string) error {
	os_, arch, _ := strings.Cut(platform, "/")
	env := []string{"KREW_ROOT=" + root, "KREW_OS=" + os_, "KREW_ARCH=" + arch, "KREW_NO_UPGRADE_CHECK=1"}
	if out, err := goTool(ctx, toolsDir, env, "krew", "install", "--manifest="+path, "--archive="+archive); err != nil {
		return fmt.Errorf("krew cannot install %s for %s from %s: %w\n%s", filepath.Base(path), platform, filepath.Base(archive), err, out)
	}
	link := filepath.Join(root, "bin", "kubectl-"+strings.ReplaceAll(PluginName, "-", "_"))
	if _, err := os.Stat(link); err != nil {
		return fmt.Errorf("krew installed %s for %s but not its binary: %w", PluginName, platform, err)
	}
	var license bool
	err := filepath.WalkDir(filepath.Join(root, "store", PluginName), func(p string, d os.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() && d.Name() == "LICENSE" {
			license = true
		}
		return err
	})
	if err != nil {
		return err
	}
	if !license {
		return fmt.Errorf("krew installed %s for %s without a LICENSE", PluginName, platform)
	}
	return nil
}

// goTool runs a tool pinned by the go.mod of toolsDir.
func goTool(ctx context.Context, toolsDir string, env []string, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, "go", append([]string{"tool"}, args...)...)
	cmd.Dir = toolsDir
	cmd.Env = append(os.Environ(), env...)
	return cmd.CombinedOutput()
}

// WriteSums writes SumsFile in dir: the sha256 of every other file there, as
// sha256sum prints them (so that `sha256sum -c SHA256SUMS` checks them).
func WriteSums(dir string) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	var b strings.Builder
	for _, e := range entries {
		if !e.Type().IsRegular() || e.Name() == SumsFile {
			continue
		}
		sum, err := fileSHA256(filepath.Join(dir, e.Name()))
		if err != nil {
			return err
		}
		fmt.Fprintf(&b, "%s  %s\n", sum, e.Name())
	}
	return os.WriteFile(filepath.Join(dir, SumsFile), []byte(b.String()), 0o644)
}

func fileSHA256(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}
