package revisions_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/rollout-guard/rollout-guard/revisions"
)

func TestStampSignature(t *testing.T) {
	key := revisions.StampKey("0123456789abcdef0123456789abcdef")
	other := revisions.StampKey("fedcba9876543210fedcba9876543210")
	at := time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)
	stamps := map[string]string{revisions.AnnotationRevision: "3", revisions.AnnotationChangedBy: "alice"}
	update := revisions.Binding{Kind: "KubeadmControlPlane", Namespace: "ns", Name: "cp", UID: "uid-1", Hash: "abc"}
	create := update
	create.UID = ""

	sig := key.Sign(stamps, update, at)
	assert.True(t, key.Verify(sig, stamps, update, time.Time{}), "an update-bound signature verifies with its UID, whenever the object was created")

	forged := map[string]string{revisions.AnnotationRevision: "3", revisions.AnnotationChangedBy: "system:admin"}
	moved := update
	moved.UID = "uid-2"
	content := update
	content.Hash = "def"
	for name, ok := range map[string]bool{
		"another author":              key.Verify(sig, forged, update, time.Time{}),
		"a stamp added":               key.Verify(sig, map[string]string{revisions.AnnotationRevision: "3", revisions.AnnotationChangedBy: "alice", revisions.AnnotationHighestRun: "{}"}, update, time.Time{}),
		"another object's UID":        key.Verify(sig, stamps, moved, time.Time{}),
		"other content":               key.Verify(sig, stamps, content, time.Time{}),
		"another key":                 other.Verify(sig, stamps, update, time.Time{}),
		"no key":                      revisions.StampKey(nil).Verify(sig, stamps, update, time.Time{}),
		"no signature":                key.Verify("", stamps, update, time.Time{}),
		"a made-up signature":         key.Verify("v1.u.1.AAAA", stamps, update, time.Time{}),
		"an update-bound as a create": key.Verify(sig, stamps, create, at),
	} {
		assert.False(t, ok, name)
	}

	csig := key.Sign(stamps, create, at)
	assert.True(t, key.Verify(csig, stamps, update, at.Add(time.Second)), "a create-bound signature verifies on the object created with it, whatever UID it got")
	assert.False(t, key.Verify(csig, stamps, update, at.Add(revisions.CreateSignatureWindow+time.Second)), "nor on an object created later under the same name")
	assert.False(t, key.Verify(csig, stamps, update, time.Time{}), "nor on an object without a creationTimestamp")
	renamed := update
	renamed.Name = "other"
	assert.False(t, key.Verify(csig, stamps, renamed, at), "nor on another name")
}

func TestSignedStampsLeaveOutTheClientsAndTheCaches(t *testing.T) {
	ann := map[string]string{
		revisions.AnnotationRevision: "1", revisions.AnnotationSignature: "v1...", revisions.AnnotationOverride: "please",
		revisions.Prefix + "cached": "x", "other.io/a": "b",
	}
	assert.Equal(t, map[string]string{revisions.AnnotationRevision: "1"}, revisions.Signed(ann, revisions.Prefix+"cached"))
}

func TestUnstampedKeepsTheClientsOverride(t *testing.T) {
	in := map[string]string{revisions.AnnotationRevision: "9", revisions.AnnotationHighestRun: "{}", revisions.AnnotationSignature: "sig",
		revisions.AnnotationOverride: "why", "a": "b"}
	assert.Equal(t, map[string]string{revisions.AnnotationOverride: "why", "a": "b"}, revisions.Unstamped(in))
	assert.Len(t, in, 5, "the object's own annotations are left as they were")
}
