package revisions

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"strconv"
	"strings"
	"time"
)

// AnnotationSignature is the guard's signature of an object's revision
// stamps: an HMAC-SHA256, by a key only the guard holds (StampKey), over
// every stamp (Signed), the object's identity and the hash of the content
// the stamps describe. Stamps whose signature does not verify were not
// written by the guard — an object created while it was down carries
// whatever its client wrote — and are not history.
//
// Its value is "v1.<binding>.<unix seconds>.<MAC>", binding "u" (signed on
// an update: the MAC covers the object's UID) or "c" (signed on a create,
// before the API server gives the object its UID: the MAC covers the
// namespace, kind and name, and holds only for an object created within
// CreateSignatureWindow of the signature, so the stamps of a deleted
// object do not verify on one created later under its name).
const AnnotationSignature = Prefix + "signature"

// CreateSignatureWindow is how far apart a create-bound signature and the
// object's creationTimestamp may be: the API server stores a created
// object within its request timeout (a minute) of the mutating webhook's
// answer; the rest is room for the guard's clock and the API server's to
// differ. A stamp set copied onto an object created under the same name
// later than that does not verify.
const CreateSignatureWindow = 5 * time.Minute

// StampKey is the key the guard signs revision stamps with.
type StampKey []byte

// MinStampKeyLen is the shortest key StampKey accepts, in bytes.
const MinStampKeyLen = 32

// Binding is what a signature ties the stamps to besides themselves.
type Binding struct {
	// Kind, Namespace and Name name the object.
	Kind, Namespace, Name string
	// UID is the object's UID; "" on a create, when it has none yet.
	UID string
	// Hash is the hash of the content the stamps describe (Snapshot.Hash).
	Hash string
}

// Unstamped returns ann without the stamps the guard writes (the override
// a client asks with, AnnotationOverride, stays): what is left of an object
// whose stamps the guard did not write, so that nothing of them is read as
// history or as what the object has run.
func Unstamped(ann map[string]string) map[string]string {
	out := make(map[string]string, len(ann))
	for k, v := range ann {
		if !strings.HasPrefix(k, Prefix) || k == AnnotationOverride {
			out[k] = v
		}
	}
	return out
}

// Signed returns the annotations a signature covers: every annotation of
// the product's prefix but the signature itself, the override a client
// asks with (AnnotationOverride, the client's), and the keys named in
// unsigned (a cache's own notes).
func Signed(ann map[string]string, unsigned ...string) map[string]string {
	out := map[string]string{}
	for k, v := range ann {
		if !strings.HasPrefix(k, Prefix) || k == AnnotationSignature || k == AnnotationOverride {
			continue
		}
		skip := false
		for _, u := range unsigned {
			skip = skip || k == u
		}
		if !skip {
			out[k] = v
		}
	}
	return out
}

// Sign returns the AnnotationSignature value of stamps (as Signed returns
// them) bound to b, signed at.
func (k StampKey) Sign(stamps map[string]string, b Binding, at time.Time) string {
	mode := "u"
	if b.UID == "" {
		mode = "c"
	}
	secs := at.Unix()
	return "v1." + mode + "." + strconv.FormatInt(secs, 10) + "." + base64.RawURLEncoding.EncodeToString(k.mac(stamps, b, mode, secs))
}

// Verify says whether sig is the signature of stamps bound to b: a
// signature of this key over exactly these stamps, this content hash and
// this object — its UID when signed on an update; when signed on a create,
// its namespace, kind and name, and a creationTimestamp (created) within
// CreateSignatureWindow of the signature.
func (k StampKey) Verify(sig string, stamps map[string]string, b Binding, created time.Time) bool {
	if len(k) == 0 || sig == "" {
		return false
	}
	parts := strings.Split(sig, ".")
	if len(parts) != 4 || parts[0] != "v1" || (parts[1] != "u" && parts[1] != "c") {
		return false
	}
	secs, err := strconv.ParseInt(parts[2], 10, 64)
	if err != nil {
		return false
	}
	got, err := base64.RawURLEncoding.DecodeString(parts[3])
	if err != nil || len(got) != sha256.Size {
		return false
	}
	mode := parts[1]
	if mode == "c" {
		if created.IsZero() {
			return false
		}
		if d := created.Sub(time.Unix(secs, 0)); d > CreateSignatureWindow || d < -CreateSignatureWindow {
			return false
		}
		b.UID = ""
	} else if b.UID == "" {
		return false
	}
	return hmac.Equal(got, k.mac(stamps, b, mode, secs))
}

// mac is the HMAC of one signature's content, encoded as JSON (a map's
// keys sorted), so no two contents encode alike.
func (k StampKey) mac(stamps map[string]string, b Binding, mode string, secs int64) []byte {
	// Strings and a map of strings always encode (invalid UTF-8 is
	// replaced, alike on both sides): the error is always nil.
	content, _ := json.Marshal(struct {
		Mode   string            `json:"m"`
		At     int64             `json:"t"`
		Kind   string            `json:"k"`
		NS     string            `json:"ns"`
		Name   string            `json:"n"`
		UID    string            `json:"u"`
		Hash   string            `json:"h"`
		Stamps map[string]string `json:"s"`
	}{mode, secs, b.Kind, b.Namespace, b.Name, b.UID, b.Hash, stamps})
	m := hmac.New(sha256.New, k)
	m.Write(content)
	return m.Sum(nil)
}
