package framework

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	clusterctlv1 "sigs.k8s.io/cluster-api/cmd/clusterctl/api/v1alpha3"
)

// ContractLabel is the label through which Cluster API learns which API
// versions of a CRD implement its v1beta2 contract. Cluster API's kustomize
// configuration adds it to every CRD it ships; the CRD files in the module
// lack it, so the environment adds it when it loads them.
const ContractLabel = "cluster.x-k8s.io/v1beta2"

// crdDir is a directory of CRDs, relative to its module, and the provider
// that ships them, as clusterctl's manifest label names it.
type crdDir struct {
	path, provider string
}

// clusterAPICRDDirs are the directories, relative to the Cluster API module,
// of the CRDs the environment installs.
var clusterAPICRDDirs = []crdDir{
	{"core/config/crd/bases", "cluster-api"},
	{"controlplane/kubeadm/config/crd/bases", "control-plane-kubeadm"},
	{"bootstrap/kubeadm/config/crd/bases", "bootstrap-kubeadm"},
}

// LoadClusterAPICRDs reads the CRDs of Cluster API's core, kubeadm control
// plane and kubeadm bootstrap providers from the module directory capiDir and
// labels each with the contract label (value "v1beta2") and as `clusterctl
// init` labels them (clusterctl's label, and the provider's name label).
func LoadClusterAPICRDs(capiDir string) ([]*apiextensionsv1.CustomResourceDefinition, error) {
	var dirs []crdDir
	for _, d := range clusterAPICRDDirs {
		dirs = append(dirs, crdDir{filepath.Join(capiDir, d.path), d.provider})
	}
	crds, err := loadLabelledCRDs(dirs)
	if err != nil {
		return nil, fmt.Errorf("%w (module %s)", err, capiDir)
	}
	return crds, nil
}

// loadLabelledCRDs reads every CRD of the YAML files in dirs and labels each
// with the contract label (value "v1beta2") and as `clusterctl init` labels
// the CRDs it installs: clusterctl's label (`clusterctl move` moves only the
// objects of the CRDs that carry it) and the provider's manifest label.
func loadLabelledCRDs(dirs []crdDir) ([]*apiextensionsv1.CustomResourceDefinition, error) {
	var crds []*apiextensionsv1.CustomResourceDefinition
	var paths []string
	for _, d := range dirs {
		dir := d.path
		paths = append(paths, dir)
		entries, err := os.ReadDir(dir)
		if err != nil {
			return nil, fmt.Errorf("reading the Cluster API CRD directory: %w", err)
		}
		var names []string
		for _, e := range entries {
			if !e.IsDir() && (strings.HasSuffix(e.Name(), ".yaml") || strings.HasSuffix(e.Name(), ".yml")) {
				names = append(names, e.Name())
			}
		}
		sort.Strings(names)
		for _, name := range names {
			loaded, err := readCRDFile(filepath.Join(dir, name))
			if err != nil {
				return nil, err
			}
			for _, crd := range loaded {
				if crd.Labels == nil {
					crd.Labels = map[string]string{}
				}
				if _, ok := crd.Labels[ContractLabel]; !ok {
					crd.Labels[ContractLabel] = "v1beta2"
				}
				crd.Labels[clusterctlv1.ClusterctlLabel] = ""
				crd.Labels[clusterv1.ProviderNameLabel] = d.provider
			}
			crds = append(crds, loaded...)
		}
	}
	if len(crds) == 0 {
		return nil, fmt.Errorf("no CRDs found in %s", strings.Join(paths, ", "))
	}
	return crds, nil
}

// LoadInfrastructureCRDs reads the CRDs of Cluster API's development
// infrastructure provider (DevCluster, DevMachine, DevMachineTemplate, and the
// Docker kinds beside them) from the sigs.k8s.io/cluster-api/test module of
// the same version as capiDir, downloading it into the module cache when
// needed. The objects of the tests reference these kinds, and Cluster API's
// conversion to v1beta1 looks up the referenced kind's CRD for its
// apiVersion: without them every v1beta1 read of such an object fails.
func LoadInfrastructureCRDs(capiDir string) ([]*apiextensionsv1.CustomResourceDefinition, error) {
	_, version, ok := strings.Cut(filepath.Base(capiDir), "@")
	if !ok {
		return nil, fmt.Errorf("cannot tell the Cluster API version from %s", capiDir)
	}
	dir, err := downloadModule(clusterAPITestModule, version)
	if err != nil {
		return nil, err
	}
	return loadLabelledCRDs([]crdDir{{filepath.Join(dir, "infrastructure/docker/config/crd/bases"), "infrastructure-docker"}})
}

// readCRDFile decodes every CustomResourceDefinition in a (multi-document)
// YAML file.
func readCRDFile(path string) ([]*apiextensionsv1.CustomResourceDefinition, error) {
	docs, err := readYAMLDocuments(path)
	if err != nil {
		return nil, err
	}
	var crds []*apiextensionsv1.CustomResourceDefinition
	for i, doc := range docs {
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := yaml.Unmarshal(doc, crd); err != nil {
			return nil, fmt.Errorf("decoding document %d of %s: %w", i+1, path, err)
		}
		if crd.Kind != "CustomResourceDefinition" {
			continue
		}
		crds = append(crds, crd)
	}
	return crds, nil
}

// readYAMLDocuments splits a YAML file into its non-empty documents.
func readYAMLDocuments(path string) ([][]byte, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", path, err)
	}
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	var docs [][]byte
	for {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			return docs, nil
		}
		if err != nil {
			return nil, fmt.Errorf("splitting %s into YAML documents: %w", path, err)
		}
		if isEmptyYAML(doc) {
			continue
		}
		docs = append(docs, doc)
	}
}

// isEmptyYAML reports whether a YAML document holds only comments and blank lines.
func isEmptyYAML(doc []byte) bool {
	for _, line := range strings.Split(string(doc), "\n") {
		line = strings.TrimSpace(line)
		if line != "" && line != "---" && !strings.HasPrefix(line, "#") {
			return false
		}
	}
	return true
}

// GuardCRDDir is the kustomization of the guard's own CRD, relative to the
// repository root.
const GuardCRDDir = "config/crd"

// LoadGuardCRDs reads the CRD of the guard's history store, RolloutRevision,
// as the install ships it: built with kustomize from GuardCRDDir under
// repoRoot, clusterctl's label included.
func LoadGuardCRDs(repoRoot string) ([]*apiextensionsv1.CustomResourceDefinition, error) {
	objs, err := BuildKustomization(filepath.Join(repoRoot, GuardCRDDir))
	if err != nil {
		return nil, fmt.Errorf("loading the guard's CRD: %w", err)
	}
	var crds []*apiextensionsv1.CustomResourceDefinition
	for _, o := range objs {
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, crd); err != nil {
			return nil, fmt.Errorf("loading the guard's CRD %s: %w", o.GetName(), err)
		}
		crds = append(crds, crd)
	}
	if len(crds) == 0 {
		return nil, fmt.Errorf("loading the guard's CRD: %s builds no CRD", GuardCRDDir)
	}
	return crds, nil
}
