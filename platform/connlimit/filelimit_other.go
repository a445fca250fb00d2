//go:build !unix

package connlimit

// fileLimit is not known on this system.
func fileLimit() (uint64, bool) { return 0, false }
