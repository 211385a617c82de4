package revisions

// CanonicalHash exposes the hash of data's canonical form to the tests; ""
// when data is not revision content of kind.
func CanonicalHash(kind string, data []byte) string {
	s, err := snapshotOf(kind, data)
	if err != nil {
		return ""
	}
	return s.Hash
}
