package access

// NewHashGateWith is NewHashGate with another password check, so a test can
// watch how many hashes run at once.
func NewHashGateWith(n int, verify func(hash, password string) bool) *HashGate {
	return newHashGate(n, verify)
}
