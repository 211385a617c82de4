package core

import (
	"fmt"
	"strings"
)

// Ref names one object: a kind and a name (the namespace comes from the
// command line or the kubeconfig).
type Ref struct {
	// Kind is the object's kind.
	Kind Kind
	// Name is the object's name.
	Name string
}

// String is "machinedeployment/md-0".
func (r Ref) String() string { return r.Kind.Singular() + "/" + r.Name }

// ParseRef parses "KIND/NAME".
func ParseRef(s string) (Ref, error) {
	kind, name, ok := strings.Cut(s, "/")
	if !ok {
		return Ref{}, fmt.Errorf("resource %q is not KIND/NAME: write e.g. machinedeployment/md-0 or kcp/my-cluster-control-plane", s)
	}
	k, err := ParseKind(kind)
	if err != nil {
		return Ref{}, err
	}
	if name == "" || strings.Contains(name, "/") {
		return Ref{}, fmt.Errorf("resource %q has no valid name: write %s/NAME", s, k.Singular())
	}
	return Ref{Kind: k, Name: name}, nil
}

// Targets are the objects a command works on, as the user named them:
// KIND/NAME arguments, or KIND NAME... (kubectl's two forms), or a KIND with
// a label selector.
type Targets struct {
	// Refs are the objects named.
	Refs []Ref
	// Kind is set when the user named a kind alone (with a selector).
	Kind *Kind
}

// ParseTargets reads a command's arguments: "KIND/NAME ...", "KIND NAME ..."
// or "KIND" alone, which needs a selector (selector true).
func ParseTargets(verb string, args []string, selector bool) (Targets, error) {
	if len(args) == 0 {
		return Targets{}, fmt.Errorf("%s needs a resource: write %s KIND/NAME (%s)", verb, verb, KindsHelp)
	}
	if strings.Contains(args[0], "/") {
		var t Targets
		for _, a := range args {
			if !strings.Contains(a, "/") {
				return Targets{}, fmt.Errorf("mixed resource forms %q and %q: write every resource as KIND/NAME", args[0], a)
			}
			r, err := ParseRef(a)
			if err != nil {
				return Targets{}, err
			}
			if err := r.Kind.Takes(verb); err != nil {
				return Targets{}, err
			}
			t.Refs = append(t.Refs, r)
		}
		if selector {
			return Targets{}, fmt.Errorf("-l/--selector selects by label: name a kind alone, e.g. %s machinedeployment -l KEY=VALUE, not %s", verb, args[0])
		}
		return t, nil
	}
	k, err := ParseKind(args[0])
	if err != nil {
		return Targets{}, err
	}
	if err := k.Takes(verb); err != nil {
		return Targets{}, err
	}
	if len(args) == 1 {
		if !selector {
			return Targets{}, fmt.Errorf("%s needs a name: write %s %s/NAME, or select by label with -l KEY=VALUE", args[0], verb, k.Singular())
		}
		return Targets{Kind: &k}, nil
	}
	if selector {
		return Targets{}, fmt.Errorf("name objects or select them with -l/--selector, not both")
	}
	var t Targets
	for _, name := range args[1:] {
		if strings.Contains(name, "/") {
			return Targets{}, fmt.Errorf("mixed resource forms %q and %q: write every resource as KIND/NAME", args[0], name)
		}
		t.Refs = append(t.Refs, Ref{Kind: k, Name: name})
	}
	return t, nil
}

// ParseOne reads the arguments of a command that works on exactly one
// object: "KIND/NAME" or "KIND NAME".
func ParseOne(verb string, args []string) (Ref, error) {
	t, err := ParseTargets(verb, args, false)
	if err != nil {
		return Ref{}, err
	}
	if len(t.Refs) != 1 {
		return Ref{}, fmt.Errorf("%s works on one object at a time; got %d", verb, len(t.Refs))
	}
	return t.Refs[0], nil
}
