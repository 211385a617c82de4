package revisions

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash/maphash"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	bootstrapv1 "sigs.k8s.io/cluster-api/api/bootstrap/kubeadm/v1beta2"
	controlplanev1 "sigs.k8s.io/cluster-api/api/controlplane/kubeadm/v1beta2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
)

// Snapshot is the content of one revision of one object, in canonical form.
//
// Data is a JSON object shaped like the part of the object's spec it comes
// from:
//
//   - MachineDeployment and MachinePool: spec.template, i.e. {"metadata":
//     {...}, "spec": {...}};
//   - KubeadmControlPlane: {"version": ..., "machineTemplate": {...},
//     "kubeadmConfigSpec": {...}}, the three revision fields of spec;
//   - ClusterClass: its spec; Cluster: its spec.topology.
//
// Canonical form: the typed struct is marshalled to JSON (so Go's omitempty
// and omitzero apply), then
//
//   - object keys are sorted (encoding/json sorts map keys), numbers are kept
//     as written, strings are escaped as encoding/json escapes them;
//   - null values are dropped (a nil pointer, slice or map is absent);
//   - empty objects and empty lists are dropped, because Cluster API treats
//     them as absent (an empty struct such as "deletion": {}, an empty
//     extraEnvs list: see dropOmittableFields in Cluster API's KCP filters).
//     The exception is kubeadmConfigSpec.{init,join}Configuration.
//     nodeRegistration.taints, where an empty list means "no taints" and
//     absent means "kubeadm's default taints"; it is kept;
//   - KubeadmControlPlane only: the defaults Cluster API applies before
//     comparing two kubeadm configs (ApplyPreviousKubeadmConfigDefaults) are
//     dropped when they are set to their default value: kubeadmConfigSpec.
//     format "cloud-config", {init,join}Configuration.nodeRegistration.
//     imagePullPolicy "IfNotPresent", joinConfiguration.discovery.file.
//     kubeConfig.user.exec.apiVersion "client.authentication.k8s.io/v1";
//   - template annotations with the Prefix rollout-guard.io/ are dropped
//     (MachineDeployment metadata.annotations, KubeadmControlPlane
//     machineTemplate.metadata.annotations).
//
// Everything else is kept, because it may mean something: false booleans
// (*bool false and absent differ for imagePullSerial or lockPassword, whose
// default is true), zero numbers, empty strings (a label value or an extra
// argument value may be ""), and the order of lists (Cluster API compares
// lists in order). Unknown fields in Data (from a newer Cluster API) are kept.
type Snapshot struct {
	// Kind is KindMachineDeployment, KindMachinePool, KindKubeadmControlPlane,
	// KindContractControlPlane, KindClusterClass or KindCluster.
	Kind string
	// Data is the canonical JSON of the revision's content.
	Data []byte
	// Hash is the content's digest: the 64 lowercase hex characters of
	// sha256(Kind + "\n" + Data). Two snapshots are the same revision when
	// their hashes are equal, and only then: the whole digest decides,
	// never a prefix of it. Names and labels carry ShortHash(Hash), which
	// names a revision but never identifies its content. A Snapshot read
	// from a record's metadata alone holds the digest the record stores
	// (AnnotationDigest).
	Hash string
}

// Same says whether s and other are the same revision content: the same
// kind and the same whole digest (a snapshot without a digest is the
// same as none).
func (s Snapshot) Same(other Snapshot) bool {
	return s.Hash != "" && s.Kind == other.Kind && s.Hash == other.Hash
}

// ShortHashLength is the length of ShortHash: 10 hexadecimal digits, 40
// bits, the length earlier releases stored as the whole hash. Two contents
// of one short hash are found in minutes (revisionstest.Collide): it names
// revisions, it never decides whether two contents are the same.
const ShortHashLength = 10

// ShortHash is the part of a content's digest that names its
// RolloutRevision and fills LabelHash: the first ShortHashLength
// characters. Two contents may share a short hash; the whole digest tells
// them apart.
func ShortHash(hash string) string {
	if len(hash) <= ShortHashLength {
		return hash
	}
	return hash[:ShortHashLength]
}

// kcpContent is the part of a KubeadmControlPlane's spec a revision is made of.
type kcpContent struct {
	Version           string                                            `json:"version,omitempty"`
	MachineTemplate   controlplanev1.KubeadmControlPlaneMachineTemplate `json:"machineTemplate,omitempty,omitzero"`
	KubeadmConfigSpec bootstrapv1.KubeadmConfigSpec                     `json:"kubeadmConfigSpec,omitempty,omitzero"`
}

// ForMachineDeployment returns the Snapshot of md's spec.template.
func ForMachineDeployment(md *clusterv1.MachineDeployment) (Snapshot, error) {
	if md == nil {
		return Snapshot{}, errors.New("snapshot of MachineDeployment: the object is nil")
	}
	raw, err := json.Marshal(&md.Spec.Template)
	if err != nil {
		return Snapshot{}, fmt.Errorf("snapshot of MachineDeployment %s/%s: %w", md.Namespace, md.Name, err)
	}
	s, err := snapshotOf(KindMachineDeployment, raw)
	if err != nil {
		return Snapshot{}, fmt.Errorf("snapshot of MachineDeployment %s/%s: %w", md.Namespace, md.Name, err)
	}
	return s, nil
}

// ForMachinePool returns the Snapshot of mp's spec.template: the same
// content, canonical form and rules as a MachineDeployment's, under its own
// kind (so equal templates of the two kinds never share a hash).
func ForMachinePool(mp *clusterv1.MachinePool) (Snapshot, error) {
	if mp == nil {
		return Snapshot{}, errors.New("snapshot of MachinePool: the object is nil")
	}
	raw, err := json.Marshal(&mp.Spec.Template)
	if err != nil {
		return Snapshot{}, fmt.Errorf("snapshot of MachinePool %s/%s: %w", mp.Namespace, mp.Name, err)
	}
	s, err := snapshotOf(KindMachinePool, raw)
	if err != nil {
		return Snapshot{}, fmt.Errorf("snapshot of MachinePool %s/%s: %w", mp.Namespace, mp.Name, err)
	}
	return s, nil
}

// ForContractControlPlane returns the Snapshot of a control plane of any
// provider, read as an unstructured object at the fields of Cluster API's
// control-plane contract: spec.version and spec.machineTemplate. What else
// its spec holds is the provider's and is not part of the revision.
func ForContractControlPlane(cp *unstructured.Unstructured) (Snapshot, error) {
	if cp == nil {
		return Snapshot{}, errors.New("snapshot of a control plane: the object is nil")
	}
	id := cp.GetKind() + " " + cp.GetNamespace() + "/" + cp.GetName()
	content := map[string]any{}
	if v, ok, _ := unstructured.NestedFieldNoCopy(cp.Object, "spec", "version"); ok {
		content["version"] = v
	}
	if t, ok, _ := unstructured.NestedFieldNoCopy(cp.Object, "spec", "machineTemplate"); ok {
		content["machineTemplate"] = t
	}
	raw, err := json.Marshal(content)
	if err != nil {
		return Snapshot{}, fmt.Errorf("snapshot of %s: %w", id, err)
	}
	s, err := snapshotOf(KindContractControlPlane, raw)
	if err != nil {
		return Snapshot{}, fmt.Errorf("snapshot of %s: %w", id, err)
	}
	return s, nil
}

// ForKubeadmControlPlane returns the Snapshot of kcp's spec.version,
// spec.machineTemplate and spec.kubeadmConfigSpec.
func ForKubeadmControlPlane(kcp *controlplanev1.KubeadmControlPlane) (Snapshot, error) {
	if kcp == nil {
		return Snapshot{}, errors.New("snapshot of KubeadmControlPlane: the object is nil")
	}
	raw, err := json.Marshal(kcpContentOf(kcp))
	if err != nil {
		return Snapshot{}, fmt.Errorf("snapshot of KubeadmControlPlane %s/%s: %w", kcp.Namespace, kcp.Name, err)
	}
	s, err := snapshotOf(KindKubeadmControlPlane, raw)
	if err != nil {
		return Snapshot{}, fmt.Errorf("snapshot of KubeadmControlPlane %s/%s: %w", kcp.Namespace, kcp.Name, err)
	}
	return s, nil
}

// fingerprintSeed is this process's seed of content fingerprints: they are
// compared within one process only, never stored.
var fingerprintSeed = maphash.MakeSeed()

// FingerprintMachineDeployment returns a fast 64-bit hash of md's revision
// content as Go encodes it, before it is made canonical: two versions of one
// object with the same fingerprint have the same content (and Snapshot);
// different fingerprints may still have the same Snapshot. Only for
// comparing within this process: the seed is drawn at start.
func FingerprintMachineDeployment(md *clusterv1.MachineDeployment) (uint64, error) {
	return fingerprintOf(&md.Spec.Template)
}

// FingerprintKubeadmControlPlane is FingerprintMachineDeployment of a
// KubeadmControlPlane.
func FingerprintKubeadmControlPlane(kcp *controlplanev1.KubeadmControlPlane) (uint64, error) {
	return fingerprintOf(kcpContentOf(kcp))
}

// fingerprintOf hashes the JSON of content.
func fingerprintOf(content any) (uint64, error) {
	raw, err := json.Marshal(content)
	if err != nil {
		return 0, fmt.Errorf("fingerprint of a revision content: %w", err)
	}
	return maphash.Bytes(fingerprintSeed, raw), nil
}

func kcpContentOf(kcp *controlplanev1.KubeadmControlPlane) *kcpContent {
	return &kcpContent{
		Version:           kcp.Spec.Version,
		MachineTemplate:   kcp.Spec.MachineTemplate,
		KubeadmConfigSpec: kcp.Spec.KubeadmConfigSpec,
	}
}

// snapshotOf canonicalizes raw, the JSON of kind's revision content, and
// hashes it. It is idempotent: the Data of a Snapshot gives the same Snapshot.
func snapshotOf(kind string, raw []byte) (Snapshot, error) {
	if _, ok := shapes[kind]; !ok {
		return Snapshot{}, fmt.Errorf("kind %q has no revisions: want %s", kind, knownKinds)
	}
	v, err := decodeJSON(raw)
	if err != nil {
		return Snapshot{}, fmt.Errorf("revision content is not JSON: %w", err)
	}
	obj, ok := v.(map[string]any)
	if !ok {
		return Snapshot{}, fmt.Errorf("revision content is not a JSON object")
	}
	c, _ := canonicalize(shapes[kind].rules, []string{}, obj)
	data, err := json.Marshal(c)
	if err != nil {
		return Snapshot{}, fmt.Errorf("encode revision content: %w", err)
	}
	return Snapshot{Kind: kind, Data: data, Hash: hashOf(kind, data)}, nil
}

func hashOf(kind string, data []byte) string {
	h := sha256.New()
	h.Write([]byte(kind))
	h.Write([]byte{'\n'})
	h.Write(data)
	return hex.EncodeToString(h.Sum(nil))
}

// IsDigest says whether s is a content digest as Snapshot.Hash holds it:
// 64 lowercase hexadecimal digits.
func IsDigest(s string) bool {
	if len(s) != sha256.Size*2 {
		return false
	}
	for i := range len(s) {
		if c := s[i]; (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// decodeJSON decodes one JSON value, keeping numbers as written.
func decodeJSON(raw []byte) (any, error) {
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		return nil, err
	}
	if _, err := d.Token(); err == nil {
		return nil, errors.New("trailing data after the JSON value")
	}
	return v, nil
}

// kindRules are the kind-specific canonicalization rules, by data path.
type kindRules struct {
	// annotations is the path of the template annotations.
	annotations []string
	// keepEmpty are paths where an empty list differs from an absent one.
	keepEmpty [][]string
	// defaults are paths dropped when they hold the given default value.
	defaults []pathValue
}

type pathValue struct {
	path  []string
	value string
}

var (
	mdRules = kindRules{
		annotations: []string{"metadata", "annotations"},
	}
	kcpRules = kindRules{
		annotations: []string{"machineTemplate", "metadata", "annotations"},
		keepEmpty: [][]string{
			{"kubeadmConfigSpec", "initConfiguration", "nodeRegistration", "taints"},
			{"kubeadmConfigSpec", "joinConfiguration", "nodeRegistration", "taints"},
		},
		defaults: []pathValue{
			{[]string{"kubeadmConfigSpec", "format"}, string(bootstrapv1.CloudConfig)},
			{[]string{"kubeadmConfigSpec", "initConfiguration", "nodeRegistration", "imagePullPolicy"}, "IfNotPresent"},
			{[]string{"kubeadmConfigSpec", "joinConfiguration", "nodeRegistration", "imagePullPolicy"}, "IfNotPresent"},
			{[]string{"kubeadmConfigSpec", "joinConfiguration", "discovery", "file", "kubeConfig", "user", "exec", "apiVersion"}, "client.authentication.k8s.io/v1"},
		},
	}
	// contractRules know only the contract's fields: no defaults of a
	// provider are dropped, as the product cannot know them.
	contractRules = kindRules{
		annotations: []string{"machineTemplate", "metadata", "annotations"},
	}
)

// canonicalize returns v in canonical form and whether it is kept (false for
// null, and for empty objects and lists outside keepEmpty paths). path is the
// path of v from the root of the data (empty, not nil, at the root); nil
// inside lists, where only the generic rules apply.
func canonicalize(r *kindRules, path []string, v any) (any, bool) {
	switch x := v.(type) {
	case nil:
		return nil, false
	case map[string]any:
		isAnnotations := path != nil && equalPath(path, r.annotations)
		out := make(map[string]any, len(x))
		for k, child := range x {
			if isAnnotations && strings.HasPrefix(k, Prefix) {
				continue
			}
			var childPath []string
			if path != nil {
				childPath = append(path[:len(path):len(path)], k)
				if s, ok := child.(string); ok && r.isDefault(childPath, s) {
					continue
				}
			}
			if c, keep := canonicalize(r, childPath, child); keep {
				out[k] = c
			}
		}
		if len(out) == 0 {
			return out, false
		}
		return out, true
	case []any:
		out := make([]any, len(x))
		for i, child := range x {
			c, _ := canonicalize(r, nil, child)
			if c == nil {
				// Keep positions: a null element stays null.
				out[i] = nil
				continue
			}
			out[i] = c
		}
		if len(out) == 0 {
			return out, path != nil && r.keepsEmpty(path)
		}
		return out, true
	default:
		return v, true
	}
}

func (r *kindRules) keepsEmpty(path []string) bool {
	for _, p := range r.keepEmpty {
		if equalPath(path, p) {
			return true
		}
	}
	return false
}

func (r *kindRules) isDefault(path []string, value string) bool {
	for _, d := range r.defaults {
		if value == d.value && equalPath(path, d.path) {
			return true
		}
	}
	return false
}

func equalPath(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// Summary is the gist of a revision, for history tables.
type Summary struct {
	// Version is the Kubernetes version.
	Version string
	// Infrastructure is the infrastructure template, "Kind/name", e.g.
	// "DevMachineTemplate/md-1"; "" if none.
	Infrastructure string
	// Bootstrap is the MachineDeployment's bootstrap: the config template
	// "Kind/name" (e.g. "KubeadmConfigTemplate/md-0") or "secret:<name>" for
	// a data secret; always "" for a KubeadmControlPlane.
	Bootstrap string
	// EtcdImageTag is the KubeadmControlPlane's explicit etcd image tag, ""
	// when kubeadm's default applies (and for a MachineDeployment).
	EtcdImageTag string
	// Class is a Cluster topology's ClusterClass ("name", or
	// "namespace/name" when the topology names its namespace); "" for
	// other kinds.
	Class string
}

// Summary returns the gist of s for history tables.
func (s Snapshot) Summary() (Summary, error) {
	sh, ok := shapes[s.Kind]
	if !ok {
		return Summary{}, fmt.Errorf("summary of revision %s: kind %q has no revisions", s.Hash, s.Kind)
	}
	sum, err := sh.summary(s.Data)
	if err != nil {
		return Summary{}, fmt.Errorf("summary of %s revision %s: %w", s.Kind, s.Hash, err)
	}
	return sum, nil
}

func refString(r clusterv1.ContractVersionedObjectReference) string {
	if !r.IsDefined() {
		return ""
	}
	return r.Kind + "/" + r.Name
}
