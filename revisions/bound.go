package revisions

import (
	"encoding/json"
	"fmt"
	"unicode/utf8"
)

// MaxClientText is the most bytes of a string a client sets (a
// change-cause, an override reason, a field manager, a user name) that the
// guard keeps: on the object's stamps, in its RolloutRevisions and in the
// memory of every replica. A longer one is kept cut, marked as such
// (Bound).
//
// Why cut rather than refuse: the string is an account of a change, never
// what the change is made of; refusing it would refuse a safe change for
// its comment, and a change-cause comes from tools (kubectl, GitOps
// controllers) a user cannot always shorten. Why bound it at all: the
// guard keeps each one on the object, in a record, and in the revision
// index of every replica, so causes as large as annotations allow would
// grow each replica past its memory limit (docs/security.md, G7).
const MaxClientText = 1024

// Bound returns s when it holds at most MaxClientText bytes, else its
// beginning, cut at a character boundary, followed by a mark that says how
// long it was: "… (truncated, N bytes)". The result holds at most
// MaxClientText bytes, and Bound(Bound(s)) == Bound(s).
func Bound(s string) string {
	if len(s) <= MaxClientText {
		return s
	}
	mark := fmt.Sprintf("… (truncated, %d bytes)", len(s))
	cut := MaxClientText - len(mark)
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + mark
}

// Bounded returns r with every string a client sets bounded (Bound): who
// changed it, through which field manager, why, and who overrode what why,
// for each restart too.
func (r Record) Bounded() Record {
	r.ChangedBy, r.FieldManager, r.ChangeCause = Bound(r.ChangedBy), Bound(r.FieldManager), Bound(r.ChangeCause)
	if r.Override != nil {
		o := *r.Override
		o.By, o.Reason = Bound(o.By), Bound(o.Reason)
		r.Override = &o
	}
	if len(r.Restarts) > 0 {
		rs := make([]Restart, len(r.Restarts))
		for i, x := range r.Restarts {
			rs[i] = x.Bounded()
		}
		r.Restarts = rs
	}
	return r
}

// Bounded returns x with every string a client sets bounded (Bound).
func (x Restart) Bounded() Restart {
	x.By, x.FieldManager, x.Cause, x.After = Bound(x.By), Bound(x.FieldManager), Bound(x.Cause), Bound(x.After)
	return x
}

// BoundStamp returns the value v of the product's annotation key as the
// guard keeps it: a client's string bounded (Bound); a list of restarts
// with each one's strings bounded; any other value as it is. ok is false
// when v is kept as it is.
func BoundStamp(key, v string) (out string, ok bool) {
	switch key {
	case AnnotationChangedBy, AnnotationFieldManager, AnnotationChangeCause, AnnotationOverriddenBy, AnnotationOverrideReason:
		if len(v) <= MaxClientText {
			return v, false
		}
		return Bound(v), true
	case AnnotationRestarts, AnnotationRestart:
		if len(v) <= MaxClientText {
			return v, false
		}
		var list []Restart
		if json.Unmarshal([]byte(v), &list) == nil {
			for i := range list {
				list[i] = list[i].Bounded()
			}
			if raw, err := json.Marshal(list); err == nil && len(raw) < len(v) {
				return string(raw), true
			}
			return v, false
		}
		var one Restart
		if json.Unmarshal([]byte(v), &one) == nil {
			if raw, err := json.Marshal(one.Bounded()); err == nil && len(raw) < len(v) {
				return string(raw), true
			}
		}
	}
	return v, false
}
