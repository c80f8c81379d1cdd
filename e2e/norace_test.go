//go:build !race

package e2e

// raceEnabled: the tests run without -race, and so does the server.
const raceEnabled = false
