package main

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestDevBaseURL: under gantry dev, emailed links point where it listens.
func TestDevBaseURL(t *testing.T) {
	t.Parallel()
	for addr, want := range map[string]string{
		":8080":          "http://localhost:8080",
		"127.0.0.1:9000": "http://127.0.0.1:9000",
		"0.0.0.0:8081":   "http://localhost:8081",
		"[::1]:8082":     "http://[::1]:8082",
		"not an address": "http://localhost:8080",
	} {
		require.Equal(t, want, devBaseURL(addr).String(), addr)
	}
}
