package revisions

import (
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"
)

// ChangeCause returns a short, generated description of the change from one
// snapshot to the other, for AnnotationChangeCause when the client gave none:
// "version v1.34.2 → v1.35.0; infrastructureRef md-1 → md-2",
// "labels team=a → team=b". Version, infrastructure, bootstrap and etcd come
// first; template labels and annotations are one item each; at most four
// items are listed, then "and N more". No difference gives "".
func ChangeCause(from, to Snapshot) (string, error) {
	changes, err := Diff(from, to)
	if err != nil {
		return "", fmt.Errorf("change-cause: %w", err)
	}
	return causeOf(changes), nil
}

// Description is what a new revision's stamps say of the change that made
// it, when its client said nothing.
type Description struct {
	// Cause is ChangeCause of the change.
	Cause string
	// InPlace is IsInPlace of the change.
	InPlace bool
}

// Describe returns ChangeCause and IsInPlace of the change from one
// snapshot to the other, reading each snapshot once: the mutating webhook
// needs both of every new revision, and reading a snapshot (decoding its
// content, walking every field) is most of what either costs.
func Describe(from, to Snapshot) (Description, error) {
	if len(from.Data) == 0 && from.Kind == "" {
		// A creation: nothing is in place.
		cause, err := ChangeCause(from, to)
		return Description{Cause: cause}, err
	}
	kind, fl, tl, err := leavesOfPair(from, to)
	if err != nil {
		return Description{}, fmt.Errorf("describing the change: %w", err)
	}
	return Description{Cause: causeOf(changesOf(kind, fl, tl, false)), InPlace: inPlaceOf(kind, fl, tl)}, nil
}

// causeOf is ChangeCause of changes, the differences Diff found.
func causeOf(changes []Change) string {
	type item struct {
		rank  int
		text  string
		group string // "labels" or "annotations": text is built from groups
	}
	var items []item
	groups := map[string][]string{}
	changes = withoutAddedKeys(changes)
	for _, c := range changes {
		if g, key, ok := metadataKey(c.Path); ok {
			if _, seen := groups[g]; !seen {
				items = append(items, item{rank: 4, group: g})
			}
			groups[g] = append(groups[g], metadataPart(key, c))
			continue
		}
		items = append(items, item{rank: causeRank(c.Path), text: causeText(c)})
	}
	for i := range items {
		if g := items[i].group; g != "" {
			parts := groups[g]
			items[i].text = g + " " + strings.Join(parts[:min(len(parts), 3)], ", ")
			if len(parts) > 3 {
				items[i].text += fmt.Sprintf(" (+%d more)", len(parts)-3)
			}
		}
	}
	slices.SortStableFunc(items, func(a, b item) int { return a.rank - b.rank })
	const maxItems = 4
	texts := make([]string, 0, maxItems+1)
	for i, it := range items {
		if i == maxItems {
			texts = append(texts, fmt.Sprintf("and %d more", len(items)-maxItems))
			break
		}
		texts = append(texts, it.text)
	}
	return strings.Join(texts, "; ")
}

const etcdImageTagPath = "kubeadmConfigSpec.clusterConfiguration.etcd.local.imageTag"

func causeRank(path string) int {
	switch {
	case path == "version":
		return 0
	case path == "infrastructureRef" || strings.HasPrefix(path, "infrastructureRef."):
		return 1
	case path == "bootstrap" || strings.HasPrefix(path, "bootstrap."):
		return 2
	case path == etcdImageTagPath:
		return 3
	}
	return 4
}

func causeText(c Change) string {
	from, to := c.From, c.To
	switch {
	case c.Path == etcdImageTagPath:
		return "etcd " + orText(short(from), "(kubeadm default)") + " → " + orText(short(to), "(kubeadm default)")
	case (c.Path == "infrastructureRef" || c.Path == "bootstrap.configRef") && from != "" && to != "":
		// References: name only when the kind stays the same.
		fk, fn, _ := strings.Cut(from, "/")
		tk, tn, _ := strings.Cut(to, "/")
		if fk == tk {
			from, to = fn, tn
		}
	}
	return c.Path + " " + orText(short(from), "(none)") + " → " + orText(short(to), "(none)")
}

// metadataKey splits "metadata.labels.team" into ("labels", "team").
func metadataKey(path string) (group, key string, ok bool) {
	for _, g := range []string{"labels", "annotations"} {
		p := "metadata." + g
		switch {
		case strings.HasPrefix(path, p+"."):
			return g, path[len(p)+1:], true
		case strings.HasPrefix(path, p+"[") && strings.HasSuffix(path, "]"):
			return g, path[len(p)+1 : len(path)-1], true
		}
	}
	return "", "", false
}

func metadataPart(key string, c Change) string {
	switch {
	case c.From == "":
		return "+" + key + "=" + short(c.To)
	case c.To == "":
		return "-" + key + "=" + short(c.From)
	}
	return key + "=" + short(c.From) + " → " + key + "=" + short(c.To)
}

func orText(s, none string) string {
	if s == "" {
		return none
	}
	return s
}

// short makes a value fit a one-line change-cause: whitespace runs
// (newlines included) become one space, and long values are truncated.
func short(s string) string {
	const maxRunes = 40
	if strings.ContainsAny(s, "\n\r\t") || strings.Contains(s, "  ") {
		s = strings.Join(strings.Fields(s), " ")
	}
	if utf8.RuneCountInString(s) <= maxRunes {
		return s
	}
	r := []rune(s)
	return string(r[:maxRunes-1]) + "…"
}

// withoutAddedKeys drops, of a list element added or removed whole, the
// change of the field that keys it ("variables[x].name (none) → x"): its
// path names it already, and its other fields' changes say what it holds.
func withoutAddedKeys(changes []Change) []Change {
	out := changes[:0:0]
	for _, c := range changes {
		if isKeyOfWholeElement(c, changes) {
			continue
		}
		out = append(out, c)
	}
	return out
}

// isKeyOfWholeElement says whether c is the keying field of a list element
// that was added or removed whole, with other fields changed beside it.
func isKeyOfWholeElement(c Change, changes []Change) bool {
	open := strings.LastIndex(c.Path, "[")
	closeAt := strings.LastIndex(c.Path, "].")
	if open < 0 || closeAt < open {
		return false
	}
	key, field := c.Path[open+1:closeAt], c.Path[closeAt+2:]
	if strings.Contains(field, ".") || (c.From != "" && c.To != "") || (c.From != key && c.To != key) {
		return false
	}
	prefix := c.Path[:closeAt+2]
	for _, other := range changes {
		if other.Path != c.Path && strings.HasPrefix(other.Path, prefix) {
			return true
		}
	}
	return false
}
