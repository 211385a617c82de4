package core

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/cli-runtime/pkg/printers"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/rollout-guard/rollout-guard/revisions"
)

// EmitFormat is --emit: what to print instead of changing the live object.
type EmitFormat string

// The --emit formats.
const (
	// EmitNone changes the live object.
	EmitNone EmitFormat = ""
	// emitYAML prints the manifest to commit to Git.
	emitYAML EmitFormat = "yaml"
	// emitPatch prints the JSON merge patch to commit to Git.
	emitPatch EmitFormat = "patch"
)

// EmitHelp is the help of --emit.
const EmitHelp = `Change nothing; print the change for Git instead: "yaml" prints the manifest (the live object with the change applied, without what the API server and controllers fill in: status, managedFields, resourceVersion, uid, creationTimestamp, generation, ownerReferences, finalizers, rollout-guard's stamps), "patch" the JSON merge patch. Checked against rollout-guard's policy as the change itself.`

// ParseEmit reads --emit: "" (none), yaml or patch, case-insensitively.
func ParseEmit(s string) (EmitFormat, error) {
	switch f := EmitFormat(strings.ToLower(s)); f {
	case EmitNone, emitYAML, emitPatch:
		return f, nil
	}
	return "", fmt.Errorf(`--emit must be "yaml" or "patch", not %q`, s)
}

// ValidateEmit refuses the flags that have no meaning with --emit, which
// sends nothing.
func ValidateEmit(emit EmitFormat, dry DryRun, output string, changeCauseSet, force bool) error {
	if emit == EmitNone {
		return nil
	}
	switch {
	case output != "":
		return fmt.Errorf("--emit prints the manifest or patch itself; leave out -o")
	case dry != DryRunNone:
		return fmt.Errorf("--emit sends nothing; leave out --dry-run (to ask the guard itself, use --dry-run=server without --emit)")
	case force:
		return fmt.Errorf("--force changes the live object; --emit changes nothing: use one of them")
	case changeCauseSet:
		return fmt.Errorf("--change-cause is sent with a live change; with --emit, give the reason in the Git commit message")
	}
	return nil
}

// serverFields are the fields of metadata the API server and controllers
// fill in, which a manifest in Git must not carry: an applied manifest
// with a resourceVersion is a precondition that fails once the object
// changes, and uids and owner references belong to one cluster.
var serverFields = []string{"managedFields", "resourceVersion", "uid", "creationTimestamp", "generation", "selfLink",
	"deletionTimestamp", "deletionGracePeriodSeconds", "ownerReferences", "finalizers"}

// LastAppliedAnnotation is where kubectl's client-side apply keeps what it
// applied last.
const LastAppliedAnnotation = "kubectl.kubernetes.io/last-applied-configuration"

// manifestOf is obj as a manifest to commit to Git: its apiVersion and kind,
// its name, namespace, labels and annotations and its spec, without status,
// the serverFields, kubectl's last-applied configuration and the
// rollout-guard.io/ annotations (the guard's stamps, which it writes itself
// on every change: carried in Git they would differ from the object's after
// the next change, and the GitOps controller would see drift forever).
func manifestOf(obj client.Object) (*unstructured.Unstructured, error) {
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return nil, fmt.Errorf("converting %s to a manifest: %w", Describe(obj, KindOf(obj)), err)
	}
	u := &unstructured.Unstructured{Object: m}
	u.SetGroupVersionKind(KindOf(obj).GVK)
	delete(u.Object, "status")
	md, _ := u.Object["metadata"].(map[string]any)
	for _, f := range serverFields {
		delete(md, f)
	}
	ann := u.GetAnnotations()
	for k := range ann {
		if strings.HasPrefix(k, revisions.Prefix) || k == LastAppliedAnnotation {
			delete(ann, k)
		}
	}
	if len(ann) == 0 {
		delete(md, "annotations")
	} else {
		u.SetAnnotations(ann)
	}
	return u, nil
}

// gitPatchOf is a rollback or switch merge patch of obj as it goes to Git:
// without the resourceVersion precondition and the annotations a live
// change carries (the change-cause, an override), with the object's
// apiVersion, kind, name and namespace, so that it can be used as is with
// kubectl patch --type merge and as a kustomize patch.
func gitPatchOf(obj client.Object, patch []byte) ([]byte, error) {
	var p map[string]any
	if err := json.Unmarshal(patch, &p); err != nil {
		return nil, fmt.Errorf("decoding the patch: %w", err)
	}
	kind := KindOf(obj)
	p["apiVersion"] = kind.GVK.GroupVersion().String()
	p["kind"] = kind.GVK.Kind
	p["metadata"] = map[string]any{"name": obj.GetName(), "namespace": obj.GetNamespace()}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(p); err != nil {
		return nil, fmt.Errorf("encoding the patch: %w", err)
	}
	return buf.Bytes(), nil
}

// Emit prints the change of obj into newObj (made by patch) for Git.
func Emit(out io.Writer, format EmitFormat, obj, newObj client.Object, patch []byte) error {
	switch format {
	case emitYAML:
		u, err := manifestOf(newObj)
		if err != nil {
			return err
		}
		return (&printers.YAMLPrinter{}).PrintObj(u, out)
	case emitPatch:
		p, err := gitPatchOf(obj, patch)
		if err != nil {
			return fmt.Errorf("printing the patch of %s: %w", Describe(obj, KindOf(obj)), err)
		}
		_, err = out.Write(p)
		return err
	}
	return fmt.Errorf("--emit %q: nothing to print", format)
}
