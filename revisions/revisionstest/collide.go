// Package revisionstest makes, for tests, two revision contents that share
// a short hash (revisions.ShortHash): a real collision of the 40 bits that
// name a RolloutRevision, found by a birthday search over a nonce. Tests
// use it to show that two such contents are two revisions everywhere —
// the guard, its history and the CLI — as they would be for an attacker
// who runs the same search (about two million SHA-256 computations).
//
// It is for tests only: nothing in the guard or the CLI imports it.
package revisionstest

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"fmt"

	"github.com/rollout-guard/rollout-guard/revisions"
)

// MaxTries bounds the search: with 2^21 nonces of each content the chance
// that no pair of the two collides is below one in 50.
const MaxTries = 1 << 23

// Collide finds nonces x and y such that the revision content a of kind,
// with its one placeholder replaced by x, and the content b, with its
// placeholder replaced by y, share their short hash. a and b are canonical
// revision data (revisions.Snapshot.Data) that differ once the nonces are
// in: for example two templates, each with a label whose value is
// placeholder, that name different infrastructure templates. A nonce is
// 10 lowercase hexadecimal digits: a valid label value that the canonical
// form keeps as it is, so the data with the nonce in is canonical too.
func Collide(kind string, a, b []byte, placeholder string) (x, y string, _ error) {
	type split struct{ before, after []byte }
	cut := func(data []byte) (split, error) {
		i := bytes.Index(data, []byte(placeholder))
		if i < 0 || bytes.Count(data, []byte(placeholder)) != 1 {
			return split{}, fmt.Errorf("the data must hold the placeholder %q exactly once", placeholder)
		}
		return split{before: append([]byte(kind+"\n"), data[:i]...), after: data[i+len(placeholder):]}, nil
	}
	sa, err := cut(a)
	if err != nil {
		return "", "", err
	}
	sb, err := cut(b)
	if err != nil {
		return "", "", err
	}
	seen := make(map[uint64]uint64, 1<<22)
	buf := make([]byte, 0, len(sa.before)+len(sa.after)+len(sb.before)+len(sb.after)+10)
	key := func(s split, nonce string) uint64 {
		buf = append(append(append(buf[:0], s.before...), nonce...), s.after...)
		sum := sha256.Sum256(buf)
		var k [8]byte
		copy(k[3:], sum[:revisions.ShortHashLength/2])
		return binary.BigEndian.Uint64(k[:])
	}
	for i := uint64(0); i < MaxTries; i++ {
		nonce := Nonce(i)
		for family, s := range []split{sa, sb} {
			k := key(s, nonce)
			other, ok := seen[k]
			if !ok {
				seen[k] = uint64(family)<<40 | i
				continue
			}
			if int(other>>40) != family {
				if family == 0 {
					return nonce, Nonce(other & (1<<40 - 1)), nil
				}
				return Nonce(other & (1<<40 - 1)), nonce, nil
			}
		}
	}
	return "", "", fmt.Errorf("no two contents of one short hash among %d nonces of each", MaxTries)
}

// Nonce is the i-th nonce Collide tries: i in 10 lowercase hexadecimal
// digits.
func Nonce(i uint64) string {
	return fmt.Sprintf("%010x", i)
}
