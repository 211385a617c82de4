package dryrun

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"

	jsonpatch "github.com/evanphx/json-patch/v5"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
)

// Write is one write a reconciler made, as the API server answered its
// server-side dry run.
type Write struct {
	// Verb is create, apply, patch, update or delete.
	Verb string
	// GVK is the kind written, in the version the reconciler wrote it.
	GVK schema.GroupVersionKind
	// Namespace and Name name the object.
	Namespace, Name string
	// Status is true for a write of the status subresource: it changes no
	// machine and is not sent.
	Status bool
	// Edited is true for a write of an object the run was given (Edit): the
	// edited object is not on the API server, so the write is kept here and
	// not sent.
	Edited bool
	// Object is the object as the API server would store it (its answer to
	// the dry run); what was sent when the write was not sent or refused.
	Object *unstructured.Unstructured
	// Err is the API server's refusal of the write, nil when admitted or not
	// sent.
	Err error
}

// key names an object of the overlay whatever its version.
type key struct {
	gk        schema.GroupKind
	namespace string
	name      string
}

// capturingClient is the client the reconcilers run with: reads go to the
// API server except for the objects of the overlay (the edited objects, and
// what the run created), and every write is sent as a server-side dry run
// and recorded. A write the reconcilers themselves send as a dry run (the
// topology controller's way to compare its intent with the stored object)
// goes through unchanged and is recorded only when refused.
type capturingClient struct {
	client.Client

	mu sync.Mutex
	// edited are the objects the run was given, in place of the stored
	// ones.
	edited map[key]*unstructured.Unstructured
	// created are the objects the run's dry-run creates answered, so that
	// the reconciler reads what it created as it would after a real create.
	created map[key]*unstructured.Unstructured
	// writes are the run's writes, in order.
	writes []Write
	// send says whether writes of objects not edited are sent as dry runs
	// (false: recorded only).
	send bool
}

func newCapturingClient(c client.Client) *capturingClient {
	return &capturingClient{Client: c, edited: map[key]*unstructured.Unstructured{}, created: map[key]*unstructured.Unstructured{}, send: true}
}

// reset forgets the writes and the created objects of the last run, and
// sets whether the next run sends its writes.
func (c *capturingClient) reset(send bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.writes, c.created, c.send = nil, map[key]*unstructured.Unstructured{}, send
}

// takeWrites returns the writes recorded since the last reset.
func (c *capturingClient) takeWrites() []Write {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]Write(nil), c.writes...)
}

func (c *capturingClient) keyOf(obj runtime.Object, namespace, name string) (key, schema.GroupVersionKind, error) {
	gvk, err := apiutil.GVKForObject(obj, c.Scheme())
	if err != nil {
		return key{}, gvk, fmt.Errorf("finding the kind of %T: %w", obj, err)
	}
	return key{gk: gvk.GroupKind(), namespace: namespace, name: name}, gvk, nil
}

// edit puts obj in place of the stored object of its name.
func (c *capturingClient) edit(obj client.Object) error {
	k, gvk, err := c.keyOf(obj, obj.GetNamespace(), obj.GetName())
	if err != nil {
		return err
	}
	u, err := toUnstructured(obj, gvk)
	if err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.edited[k] = u
	return nil
}

// overlaid returns the overlay's object of k, nil when the API server's is
// read.
func (c *capturingClient) overlaid(k key) *unstructured.Unstructured {
	c.mu.Lock()
	defer c.mu.Unlock()
	if u, ok := c.edited[k]; ok {
		return u.DeepCopy()
	}
	if u, ok := c.created[k]; ok {
		return u.DeepCopy()
	}
	return nil
}

func (c *capturingClient) isEdited(k key) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	_, ok := c.edited[k]
	return ok
}

// Get reads the overlay's object of the key, else the API server's.
func (c *capturingClient) Get(ctx context.Context, objKey client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	k, gvk, err := c.keyOf(obj, objKey.Namespace, objKey.Name)
	if err != nil {
		return err
	}
	if u := c.overlaid(k); u != nil {
		return fromUnstructured(u, gvk, obj)
	}
	return c.Client.Get(ctx, objKey, obj, opts...)
}

func (c *capturingClient) record(w Write) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.writes = append(c.writes, w)
	if w.Verb == "create" && w.Err == nil && w.Object != nil {
		c.created[key{gk: w.GVK.GroupKind(), namespace: w.Namespace, name: w.Name}] = w.Object.DeepCopy()
	}
}

// write records a write of obj and, unless it is not sent, sends it with
// do, which adds the dry run to the request. A patch of an edited object is
// applied to it here, so that later reads see what a reconciler wrote of it
// (a ClusterClass's status).
func (c *capturingClient) write(verb string, obj client.Object, patch client.Patch, status bool, do func() error) error {
	k, gvk, err := c.keyOf(obj, obj.GetNamespace(), obj.GetName())
	if err != nil {
		return err
	}
	w := Write{Verb: verb, GVK: gvk, Namespace: obj.GetNamespace(), Name: obj.GetName(), Status: status, Edited: c.isEdited(k)}
	c.mu.Lock()
	send := c.send
	c.mu.Unlock()
	if !w.Edited && !status && send {
		w.Err = do()
	}
	if w.Edited && patch != nil {
		if err := c.patchEdited(k, obj, patch); err != nil {
			return err
		}
	}
	w.Object, err = toUnstructured(obj, gvk)
	if err != nil {
		return err
	}
	c.record(w)
	return w.Err
}

// patchEdited applies a merge patch a reconciler sent for the edited
// object k (as Cluster API's patch helper sends them) to it.
func (c *capturingClient) patchEdited(k key, obj client.Object, patch client.Patch) error {
	if patch.Type() != types.MergePatchType {
		return nil
	}
	data, err := patch.Data(obj)
	if err != nil {
		return fmt.Errorf("reading the patch of %s %s: %w", k.gk.Kind, k.name, err)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	current, err := c.edited[k].MarshalJSON()
	if err != nil {
		return fmt.Errorf("encoding %s %s: %w", k.gk.Kind, k.name, err)
	}
	patched, err := jsonpatch.MergePatch(current, data)
	if err != nil {
		return fmt.Errorf("patching %s %s: %w", k.gk.Kind, k.name, err)
	}
	u := &unstructured.Unstructured{}
	if err := u.UnmarshalJSON(patched); err != nil {
		return fmt.Errorf("decoding %s %s: %w", k.gk.Kind, k.name, err)
	}
	c.edited[k] = u
	return nil
}

// Create sends the create as a dry run.
func (c *capturingClient) Create(ctx context.Context, obj client.Object, opts ...client.CreateOption) error {
	if len((&client.CreateOptions{}).ApplyOptions(opts).DryRun) > 0 {
		return c.Client.Create(ctx, obj, opts...)
	}
	return c.write("create", obj, nil, false, func() error {
		return c.Client.Create(ctx, obj, append(opts, client.DryRunAll)...)
	})
}

// Update sends the update as a dry run.
func (c *capturingClient) Update(ctx context.Context, obj client.Object, opts ...client.UpdateOption) error {
	if len((&client.UpdateOptions{}).ApplyOptions(opts).DryRun) > 0 {
		return c.Client.Update(ctx, obj, opts...)
	}
	return c.write("update", obj, nil, false, func() error {
		return c.Client.Update(ctx, obj, append(opts, client.DryRunAll)...)
	})
}

// Patch sends the patch as a dry run.
func (c *capturingClient) Patch(ctx context.Context, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
	if len((&client.PatchOptions{}).ApplyOptions(opts).DryRun) > 0 {
		return c.Client.Patch(ctx, obj, patch, opts...)
	}
	return c.write("patch", obj, patch, false, func() error {
		return c.Client.Patch(ctx, obj, patch, append(opts, client.DryRunAll)...)
	})
}

// Delete sends the delete as a dry run.
func (c *capturingClient) Delete(ctx context.Context, obj client.Object, opts ...client.DeleteOption) error {
	if len((&client.DeleteOptions{}).ApplyOptions(opts).DryRun) > 0 {
		return c.Client.Delete(ctx, obj, opts...)
	}
	return c.write("delete", obj, nil, false, func() error {
		return c.Client.Delete(ctx, obj, append(opts, client.DryRunAll)...)
	})
}

// DeleteAllOf is refused: the reconcilers run here never delete by
// collection, and a dry run of one would not say which objects go.
func (c *capturingClient) DeleteAllOf(_ context.Context, obj client.Object, _ ...client.DeleteAllOfOption) error {
	return fmt.Errorf("a dry run of Cluster API's reconcilers cannot preview a delete of every %T", obj)
}

// Apply sends the server-side apply as a dry run.
func (c *capturingClient) Apply(ctx context.Context, obj runtime.ApplyConfiguration, opts ...client.ApplyOption) error {
	if len((&client.ApplyOptions{}).ApplyOptions(opts).DryRun) > 0 {
		// The topology controller's own dry run, comparing its intent
		// with the stored object: refused, it stops the controller as the
		// write would, so the refusal is recorded as the write's.
		err := c.Client.Apply(ctx, obj, opts...)
		if err != nil {
			if u, uerr := applyConfigurationObject(obj); uerr == nil {
				c.record(Write{Verb: "apply", GVK: u.GroupVersionKind(), Namespace: u.GetNamespace(), Name: u.GetName(), Object: u, Err: err})
			}
		}
		return err
	}
	u, err := applyConfigurationObject(obj)
	if err != nil {
		return err
	}
	k, gvk, err := c.keyOf(u, u.GetNamespace(), u.GetName())
	if err != nil {
		return err
	}
	w := Write{Verb: "apply", GVK: gvk, Namespace: u.GetNamespace(), Name: u.GetName(), Edited: c.isEdited(k), Object: u}
	c.mu.Lock()
	send := c.send
	c.mu.Unlock()
	if !w.Edited && send {
		w.Err = c.Client.Apply(ctx, obj, append(opts, client.DryRunAll)...)
		if w.Err == nil {
			// The answer was decoded into obj.
			if answer, err := applyConfigurationObject(obj); err == nil {
				w.Object = answer
			}
		}
	}
	c.record(w)
	return w.Err
}

// Status returns a writer of the status subresource whose writes are
// recorded and not sent: a status changes no machine.
func (c *capturingClient) Status() client.SubResourceWriter {
	return statusWriter{c: c}
}

// SubResource reads subresources from the API server and refuses to write
// any: the reconcilers run here write no subresource but the status
// (Status), and a write passed on here would not be a dry run.
func (c *capturingClient) SubResource(subResource string) client.SubResourceClient {
	return readOnlySubResource{SubResourceClient: c.Client.SubResource(subResource), name: subResource}
}

// readOnlySubResource is a subresource client whose writes are refused.
type readOnlySubResource struct {
	client.SubResourceClient
	name string
}

func (r readOnlySubResource) refuse(obj client.Object) error {
	return fmt.Errorf("a preview writes nothing: the %s subresource of %s was not written", r.name, obj.GetName())
}

func (r readOnlySubResource) Create(_ context.Context, obj client.Object, _ client.Object, _ ...client.SubResourceCreateOption) error {
	return r.refuse(obj)
}

func (r readOnlySubResource) Update(_ context.Context, obj client.Object, _ ...client.SubResourceUpdateOption) error {
	return r.refuse(obj)
}

func (r readOnlySubResource) Patch(_ context.Context, obj client.Object, _ client.Patch, _ ...client.SubResourcePatchOption) error {
	return r.refuse(obj)
}

func (r readOnlySubResource) Apply(_ context.Context, obj runtime.ApplyConfiguration, _ ...client.SubResourceApplyOption) error {
	return fmt.Errorf("a preview writes nothing: the %s subresource was not applied", r.name)
}

// statusWriter records status writes.
type statusWriter struct{ c *capturingClient }

func (s statusWriter) Create(_ context.Context, obj client.Object, _ client.Object, _ ...client.SubResourceCreateOption) error {
	return s.c.write("create", obj, nil, true, nil)
}

func (s statusWriter) Update(_ context.Context, obj client.Object, _ ...client.SubResourceUpdateOption) error {
	return s.c.write("update", obj, nil, true, nil)
}

func (s statusWriter) Patch(_ context.Context, obj client.Object, patch client.Patch, _ ...client.SubResourcePatchOption) error {
	return s.c.write("patch", obj, patch, true, nil)
}

func (s statusWriter) Apply(_ context.Context, obj runtime.ApplyConfiguration, _ ...client.SubResourceApplyOption) error {
	u, err := applyConfigurationObject(obj)
	if err != nil {
		return err
	}
	return s.c.write("apply", u, nil, true, nil)
}

// applyConfigurationObject is the object an apply configuration holds.
func applyConfigurationObject(obj runtime.ApplyConfiguration) (*unstructured.Unstructured, error) {
	data, err := json.Marshal(obj)
	if err != nil {
		return nil, fmt.Errorf("encoding an apply configuration: %w", err)
	}
	u := &unstructured.Unstructured{}
	if err := u.UnmarshalJSON(data); err != nil {
		return nil, fmt.Errorf("decoding an apply configuration: %w", err)
	}
	return u, nil
}

// toUnstructured is obj as an unstructured object of gvk.
func toUnstructured(obj runtime.Object, gvk schema.GroupVersionKind) (*unstructured.Unstructured, error) {
	if u, ok := obj.(*unstructured.Unstructured); ok {
		out := u.DeepCopy()
		if out.GroupVersionKind().Empty() {
			out.SetGroupVersionKind(gvk)
		}
		return out, nil
	}
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return nil, fmt.Errorf("converting %s: %w", gvk.Kind, err)
	}
	u := &unstructured.Unstructured{Object: m}
	u.SetGroupVersionKind(gvk)
	return u, nil
}

// fromUnstructured fills obj, of gvk, from u.
func fromUnstructured(u *unstructured.Unstructured, gvk schema.GroupVersionKind, obj client.Object) error {
	if out, ok := obj.(*unstructured.Unstructured); ok {
		out.Object = u.DeepCopy().Object
		out.SetGroupVersionKind(gvk)
		return nil
	}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, obj); err != nil {
		return fmt.Errorf("converting %s %s: %w", gvk.Kind, u.GetName(), err)
	}
	obj.GetObjectKind().SetGroupVersionKind(gvk)
	return nil
}
