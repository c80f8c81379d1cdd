package runner

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestParseStat(t *testing.T) {
	t.Parallel()

	state, ppid, ok := parseStat([]byte("1234 (evil) name) S 1 4321 4321 0 -1"))
	require.True(t, ok)
	require.Equal(t, byte('S'), state)
	require.Equal(t, 1, ppid)
}
